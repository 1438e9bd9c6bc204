import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { ROOT } from '../helpers/processes.ts';

/** The environment of a process a user starts by hand: no npm script variables, no loaders. */
function plainEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k) && k !== 'NODE_OPTIONS'));
}

/** Runs a command; resolves with its output, rejects with it (and the exit status) on failure. */
function run(file: string, args: string[], cwd: string): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { cwd, env: plainEnv(), timeout: 180_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${file} ${args.join(' ')} failed (${err.code}):\n${stdout}\n${stderr}`));
      else resolve({ stdout, stderr });
    });
  });
}

/** Plain JavaScript, as a client system writes it: issue, validate, refuse the reuse. */
const FLOW_MJS = `
import { createHmac } from 'node:crypto';
import { createSsoClient, SsoError, newState } from '@auth-service/client';
import { verifyWebhook } from '@auth-service/client/webhooks';

const [baseUrl, clientId, clientSecret, username] = process.argv.slice(2);
const sso = createSsoClient({ baseUrl, clientId, clientSecret });
const issued = await sso.issueToken(username, { ipAddress: '198.51.100.7' });
const validated = await sso.validateToken(issued.token, { ipAddress: '198.51.100.7' });
let reuse;
try {
  await sso.validateToken(issued.token);
  reuse = 'accepted';
} catch (err) {
  reuse = err instanceof SsoError ? { status: err.status, code: err.code, isTokenRejection: err.isTokenRejection } : String(err);
}
const second = await sso.issueToken(username);
const callback = await sso.handleCallback(second.redirect_url);
const callbackAgain = await sso.handleCallback(second.redirect_url);
const body = JSON.stringify({ event: 'user.login', timestamp: new Date().toISOString(), data: { user_id: 1 } });
const webhook = verifyWebhook(body, { 'x-auth-signature': createHmac('sha256', 'whsec').update(body).digest('hex') }, 'whsec');
console.log(JSON.stringify({
  resolved: import.meta.resolve('@auth-service/client'),
  validated, reuse, callback, callbackAgain, webhook: webhook.event,
  signInUrl: sso.signInUrl({ state: 'abc' }), state: newState().length,
}));
`;

/** Strict TypeScript against the package's declarations; compiled, then run. */
const CONSUMER_TS = `
import { createSsoClient, SsoError, type SignInRefusal, type SignInResult, type SsoUser, type ValidatedToken } from '@auth-service/client';
import { verifyWebhook, type WebhookEnvelope } from '@auth-service/client/webhooks';

const [baseUrl, clientId, clientSecret, username] = process.argv.slice(2);
const sso = createSsoClient({ baseUrl, clientId, clientSecret });

async function main(): Promise<string> {
  const issued = await sso.issueToken(username);
  const validated: ValidatedToken = await sso.validateToken(issued.token);
  const user: SsoUser = validated.user;
  const id: number = user.id;
  let refusal: SignInRefusal | 'none' = 'none';
  const again: SignInResult = await sso.handleCallback(issued.redirect_url);
  if (again.ok) {
    const name: string = again.user.username;
    return name;
  } else {
    refusal = again.reason;
  }
  try {
    await sso.validateToken(issued.token);
  } catch (err) {
    if (err instanceof SsoError && err.isTokenRejection) return \`\${id} \${refusal} \${err.code}\`;
    throw err;
  }
  return 'accepted twice';
}

/**
 * Never called: these lines only have to type-check, or fail to where marked (were the
 * declarations any, the unneeded @ts-expect-error would fail the compilation).
 */
export function typesAreReal(body: string): WebhookEnvelope<{ user_id: number }> {
  // @ts-expect-error issueToken needs a username
  void sso.issueToken();
  // @ts-expect-error a refusal reason is one of the documented codes
  const wrong: SignInRefusal = 'no_such_reason';
  void wrong;
  return verifyWebhook<{ user_id: number }>(body, new Headers(), ['old', 'new'], { toleranceSeconds: 60 });
}

console.log(await main());
`;

describe('what the repository offers for installing the SDK', () => {
  it('exports no TypeScript source from the root package.json (plain node cannot load it)', async () => {
    const root = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { exports?: unknown };
    const targets = JSON.stringify(root.exports ?? {}).match(/"[^"]*\.ts"/g) ?? [];
    expect(targets).toStrictEqual([]);
  });

  it('tells in the SDK README how to install the packed tarball, not an unpublished name', async () => {
    const readme = await readFile(path.join(ROOT, 'sdk', 'README.md'), 'utf8');
    expect(readme).not.toMatch(/npm install @auth-service\/client/);
    expect(readme).toMatch(/npm pack/);
    expect(readme).toMatch(/npm install \S+\/auth-service-client-[0-9.]+\.tgz/);
  });
});

describe('the SDK as a package: packed, installed outside the repository, used from JavaScript and strict TypeScript', () => {
  let app: TestApp;
  let base: string;
  let project: string;
  beforeAll(async () => {
    app = await startTestApp();
    base = await app.listen();
    project = await mkdtemp(path.join(os.tmpdir(), 'auth-sdk-consumer-'));
    expect(path.relative(ROOT, project).startsWith('..'), 'the project lies outside the repository').toBe(true);
    // npm pack runs the package's prepack (the build) and writes the tarball
    await run('npm', ['pack', '--pack-destination', project], path.join(ROOT, 'sdk'));
    const tarballs = (await readdir(project)).filter((f) => f.endsWith('.tgz'));
    expect(tarballs).toHaveLength(1);
    await writeFile(path.join(project, 'package.json'), JSON.stringify({ name: 'sdk-consumer', private: true, type: 'module' }));
    await run('npm', ['install', '--offline', '--no-audit', '--no-fund', `./${tarballs[0]}`], project);
  }, 300_000);
  afterAll(async () => {
    await app?.close();
    if (project) await rm(project, { recursive: true, force: true });
  });

  it('runs issue, validate and the refused reuse with plain node', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    await writeFile(path.join(project, 'flow.mjs'), FLOW_MJS);
    const { stdout } = await run(process.execPath, ['flow.mjs', base, client.client_id, client.client_secret, user.username], project);
    const out = JSON.parse(stdout);
    expect(out.resolved.startsWith(`file://${project}/node_modules/@auth-service/client/`) && out.resolved.endsWith('.js'), out.resolved).toBe(true);
    expect(out.validated).toStrictEqual({ valid: true, user: { id: user.id, username: user.username, email: user.email, roles: [user.role], full_name: user.full_name }, expires_at: expect.any(String) });
    expect(out.reuse).toStrictEqual({ status: 401, code: 'token_already_used', isTokenRejection: true });
    expect(out.callback).toMatchObject({ ok: true, user: { id: user.id, username: user.username } });
    expect(out.callbackAgain).toMatchObject({ ok: false, reason: 'token_already_used' });
    expect(out.webhook).toBe('user.login');
    expect(out.signInUrl).toBe(`${base}/sso/login?client_id=${encodeURIComponent(client.client_id)}&state=abc`);
    expect(out.state).toBe(43);
  });

  it('type-checks under strict NodeNext with the repository\'s tsc, and the compiled code runs', async () => {
    // a Node project has Node's types; nothing else is added
    await mkdir(path.join(project, 'node_modules', '@types'));
    await symlink(path.join(ROOT, 'node_modules', '@types', 'node'), path.join(project, 'node_modules', '@types', 'node'), 'dir');
    await symlink(path.join(ROOT, 'node_modules', 'undici-types'), path.join(project, 'node_modules', 'undici-types'), 'dir');
    await writeFile(path.join(project, 'consumer.ts'), CONSUMER_TS);
    await writeFile(path.join(project, 'tsconfig.json'), JSON.stringify({
      compilerOptions: { strict: true, module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', outDir: 'out' },
      files: ['consumer.ts'],
    }));
    await run(path.join(ROOT, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.json'], project);

    const client = await makeClient(app);
    const user = await makeUser(app);
    const { stdout } = await run(process.execPath, ['out/consumer.js', base, client.client_id, client.client_secret, user.username], project);
    expect(stdout.trim()).toBe(`${user.id} token_already_used token_already_used`);
  });
});
