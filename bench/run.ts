/**
 * npm run bench: token issue and validation on the real PostgreSQL, against a bare Express
 * JSON handler as the ceiling, with autocannon (50 connections). Prints req/s and latency
 * percentiles per endpoint, and the validation/ceiling ratio.
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) names the server; the
 * benchmark creates and drops its own database there.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import net from 'node:net';
import autocannon from 'autocannon';
import pg from 'pg';

const ROOT = path.resolve(fileURLToPath(new URL('../', import.meta.url)));
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
const adminUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** A port nothing listens on right now. */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

/** Starts a TypeScript entry point as its own process and waits until GET `probe` answers. */
async function start(file: string, env: Record<string, string>, probe: string): Promise<{ child: ChildProcess; port: number }> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', file], { cwd: ROOT, env: { ...process.env, ...env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'inherit'] });
  let exited = false;
  child.once('exit', () => (exited = true));
  for (let i = 0; i < 200 && !exited; i++) {
    const ok = await fetch(`http://127.0.0.1:${port}${probe}`).then((r) => r.ok, () => false);
    if (ok) return { child, port };
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${file} did not start`);
}

async function post(url: string, body: unknown): Promise<any> {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return r.json();
}

function summary(name: string, r: autocannon.Result) {
  return {
    endpoint: name,
    'req/s': Math.round(r.requests.average),
    p50_ms: r.latency.p50,
    p99_ms: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors,
    requests: r.requests.total,
  };
}

async function main() {
  const dbName = `auth_bench_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const dbUrl = new URL(adminUrl);
  dbUrl.pathname = `/${dbName}`;
  const children: ChildProcess[] = [];
  try {
    const service = await start('src/server.ts', {
      DATABASE_URL: dbUrl.toString(), PORT: '0', HOST: '127.0.0.1', NODE_ENV: 'development', LOG_LEVEL: 'warn',
      JWT_SECRET: randomBytes(32).toString('hex'), SESSION_SECRET: randomBytes(32).toString('hex'),
      TOKEN_TTL_SECONDS: '1800', RATE_LIMIT_VALIDATE_PER_MIN: '100000000', RATE_LIMIT_LOGIN_PER_MIN: '100000000',
      RATE_LIMIT_USER_PER_MIN: '100000000', REDIS_URL: '', DATA_DIR: path.join(ROOT, 'data', 'bench'),
    }, '/readyz');
    children.push(service.child);
    const base = `http://127.0.0.1:${service.port}`;

    // A client and a user, through the command line's code path (the admin CLI on this database).
    const { execFileSync } = await import('node:child_process');
    const cli = (args: string[]) => JSON.parse(execFileSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args, '--json'], { cwd: ROOT, env: { ...process.env, DATABASE_URL: dbUrl.toString(), BCRYPT_COST: '4', LOG_LEVEL: 'silent' } }).toString());
    const client = cli(['client', 'create', '--name', 'Bench', '--callback-url', 'https://bench.example/cb', '--allow-ip', '127.0.0.1']);
    cli(['user', 'create', '--username', 'bench', '--email', 'bench@example.com', '--password', 'bench password']);
    const creds = { client_id: client.client_id, client_secret: client.client_secret };
    const probe = await post(`${base}/api/sso/token`, { ...creds, username: 'bench' });
    if (!probe.token) throw new Error(`token issue failed: ${JSON.stringify(probe)}`);

    const ceiling = await start('bench/ceiling.ts', {}, '/healthz');
    children.push(ceiling.child);

    const results = [];
    // 1. Ceiling.
    results.push(summary('bare Express JSON (ceiling)', await autocannon({
      url: `http://127.0.0.1:${ceiling.port}/echo`, connections: CONNECTIONS, duration: DURATION, method: 'POST',
      headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...creds, token: probe.token }),
    })));

    // 2. Token issue; the tokens it returns feed the validation run.
    const tokens: string[] = [];
    results.push(summary('POST /api/sso/token', await autocannon({
      // twice as long as the others: issue is the slower endpoint and must leave enough tokens
      url: `${base}/api/sso/token`, connections: CONNECTIONS, duration: DURATION * 2, method: 'POST',
      headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...creds, username: 'bench' }),
      requests: [{ onResponse: (status: number, body: string) => {
        if (status === 200) tokens.push(JSON.parse(body).token);
      } }],
    } as autocannon.Options)));

    // 3. Validation: each token exactly once.
    let next = 0;
    const amount = tokens.length - 1; // the last one is validated once below as a check
    const sample = await post(`${base}/api/sso/validate`, { ...creds, token: tokens[amount] });
    if (sample.valid !== true) throw new Error(`validation failed: ${JSON.stringify(sample)}`);
    results.push(summary('POST /api/sso/validate', await autocannon({
      url: `${base}/api/sso/validate`, connections: CONNECTIONS, amount, method: 'POST',
      headers: { 'content-type': 'application/json' },
      requests: [{ setupRequest: (req: any) => ({ ...req, body: JSON.stringify({ ...creds, token: tokens[next++] }) }) }],
    })));

    console.table(results);
    const [ceil, , validate] = results;
    console.log(`validation / ceiling: ${((validate['req/s'] / ceil['req/s']) * 100).toFixed(1)}% (target >= 60%), validation p99 ${validate.p99_ms} ms (target < 20 ms), ${CONNECTIONS} connections`);
    const wrongAnswers = validate.non2xx;
    if (wrongAnswers > 0) console.log(`note: ${wrongAnswers} validation answers were not 2xx`);
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 500));
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
