import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, TEST_ENV, type TestApp, unique } from '../helpers/app.ts';
import { admin } from '../helpers/cli.ts';
import { createTestDatabase, onPostgres } from '../helpers/db.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { ROOT } from '../helpers/processes.ts';
import { USAGE } from '../../src/cli/usage.ts';

/** Runs `script` with sh in the repository, as a user types it; answers its exit status and output. */
async function shell(script: string, env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  // the environment of a terminal: no npm script variables from the test runner
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
  const child = spawn('sh', ['-c', script], { cwd: ROOT, env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  return { code, stdout, stderr };
}

/** A program that reads stdin as exactly one JSON document and prints what it holds. */
const PARSE_STDIN = `node -e 'const d = JSON.parse(require("fs").readFileSync(0, "utf8")); console.log(JSON.stringify(d))'`;

/** The installed command (package.json "bin"): a real process, its stdout read from a pipe. */
describe('auth-admin bin', () => {
  let drop: (() => Promise<void>) | undefined;
  afterAll(() => drop?.());

  it('prints exactly one JSON document on stdout for --json, so it can be piped into jq', async () => {
    const env: Record<string, string> = { ...TEST_ENV, DATA_DIR: await mkdtemp(path.join(os.tmpdir(), 'auth-bin-')) };
    if (onPostgres) {
      const database = await createTestDatabase();
      await database.db.close();
      drop = database.drop;
      env.DATABASE_URL = database.url!;
    }
    // a writing command: on a database never migrated a read-only one is refused (one opening
    // of the embedded database, the child's, is all this test can afford)
    const child = spawn(process.execPath, ['bin/auth-admin.mjs', 'client', 'create', '--name', 'Piped', '--callback-url', 'https://piped.example/cb', '--id', 'piped', '--json'], {
      cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    expect(code, stderr).toBe(0);
    const doc = JSON.parse(stdout);
    expect(doc.client_id).toBe('piped');
    expect(doc.client_secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });
});

describe('auth-admin --json through a shell pipe, as the README shows it', () => {
  let drop: (() => Promise<void>) | undefined;
  afterAll(() => drop?.());

  it('pipes `npx auth-admin ... --json` and `npm run -s admin -- ... --json` into a JSON parser', async () => {
    const env: Record<string, string> = { ...TEST_ENV, DATA_DIR: await mkdtemp(path.join(os.tmpdir(), 'auth-pipe-')) };
    if (onPostgres) {
      const database = await createTestDatabase();
      await database.db.close();
      drop = database.drop;
      env.DATABASE_URL = database.url!;
    }
    const created = await shell(`npx auth-admin client create --name Piped --callback-url https://piped.example/cb --id piped --json | ${PARSE_STDIN}`, env);
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ client_id: 'piped', client_name: 'Piped', client_secret: expect.any(String) });
    expect(created.stderr, 'the command says which database it uses, on stderr').toMatch(/admin: using /);

    const listed = await shell(`npm run -s admin -- client list --json | ${PARSE_STDIN}`, env);
    expect(listed.code, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout).map((c: { client_id: string }) => c.client_id)).toStrictEqual(['piped']);

    // without -s, npm's banner comes first and the pipe breaks: why the README never shows it
    const banner = await shell('npm run admin -- client new-secret --json', env);
    expect(banner.code, banner.stderr).toBe(0);
    expect(() => JSON.parse(banner.stdout)).toThrow();
  }, 180_000);
});

describe('every admin command prints exactly one JSON document with --json', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  it('covers each command of the usage text; stdout parses as one document, and stays empty on an error', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const linked = await makeUser(app);
    const ctx = { ipAddress: '127.0.0.1', userAgent: null };
    const pending = async (name: string) => (await app.services.links.request(linked, client.client_id, name, ctx)).link;
    await pending('json.name');
    const fresh = unique('json');
    const kept = unique('json-kept-');
    await app.services.access.createGroup(kept, { via: 'cli' });
    const passkey = (await app.db.query<{ id: number }>(
      'INSERT INTO passkeys (user_id, credential_id, public_key, name) VALUES ($1, $2, $3, $4) RETURNING id',
      [user.id, randomBytes(32).toString('base64url'), randomBytes(77), 'Json key'])).rows[0].id;
    const argsOf: Record<string, string[]> = {
      'client create': ['--name', 'Json', '--callback-url', 'https://json.example/cb', '--id', fresh],
      'client rotate-secret': [client.client_id],
      'client update': [client.client_id, '--name', 'Json renamed'],
      'client new-secret': [],
      'client set-ips': [client.client_id, '127.0.0.1'],
      'client list': [],
      'client export': [],
      'user create': ['--username', unique('jsonuser'), '--email', `${unique('j')}@example.com`, '--password', 'a long password for json'],
      'user set-password': [user.username, '--password', 'another long password 2931'],
      'user set-active': [user.username, 'true'],
      'user unlock': [user.username],
      'user passkeys': [user.username],
      'user remove-passkey': [user.username, String(passkey)],
      'link list': ['--status', 'pending'],
      'group create': [fresh],
      'group delete': [fresh],
      'group list': [],
      'user add-to-group': [user.username, kept],
      'user remove-from-group': [user.username, kept],
      'link approve': [linked.username, client.client_id],
      'link revoke': [linked.username, client.client_id],
      demo: ['--base-url', 'http://127.0.0.1:4555'],
      prune: ['--dry-run'],
    };
    const commands = [...USAGE.matchAll(/^ {2}((?:client|user|link|group) [a-z-]+|demo|prune)\b/gm)].map((m) => m[1]);
    expect(commands.length > 10, commands.join(', ')).toBe(true);
    expect(commands.filter((c) => !(c in argsOf)), 'a command of the usage text this test does not run').toStrictEqual([]);
    for (const command of commands) {
      const r = await admin(app, [...command.split(' '), ...argsOf[command], '--json']);
      expect(r.code, `${command}: ${r.stderr}`).toBe(0);
      expect(r.stdout.endsWith('}\n') || r.stdout.endsWith(']\n'), `${command}: one document and a newline`).toBe(true);
      expect(() => JSON.parse(r.stdout), `${command} printed ${r.stdout}`).not.toThrow();
    }
    const failed = await admin(app, ['user', 'set-active', 'nobody-by-this-name', 'true', '--json']);
    expect([failed.code, failed.stdout]).toStrictEqual([1, '']);
    expect(failed.stderr).toMatch(/nobody-by-this-name|No user/);
  });
});

describe('the --json examples of the README and docs/cli.md', () => {
  it('start the command line in a form that prints only the JSON document', async () => {
    const readme = (await readFile(path.join(ROOT, 'README.md'), 'utf8')) + (await readFile(path.join(ROOT, 'docs/cli.md'), 'utf8'));
    const lines = readme.replace(/\\\n/g, ' ').split('\n').filter((l) => /\s--json\b/.test(l) && /\b(npm|npx)\b/.test(l));
    expect(lines.length > 5, lines.join('\n')).toBe(true);
    // `npm run X --` without -s prints npm's banner on stdout before the JSON
    expect(lines.filter((l) => /npm run (?!-s )/.test(l)), 'use `npx auth-admin` or `npm run -s`').toStrictEqual([]);
  });
});
