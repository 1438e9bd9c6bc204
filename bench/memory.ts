/**
 * npm run bench:memory: the service's resident memory at rest and under load, on both databases,
 * beside a bare `node -e` http server measured in the same run (the reference).
 *
 * The service is started as `npm start` starts it (node with the start script's flags,
 * scripts/launch.mjs server, from dist/, built first), once on the embedded database in a fresh temporary DATA_DIR and once on a fresh
 * PostgreSQL database (bench_mem_<random>, dropped after). For each it reads VmRSS from
 * /proc/PID/status (plus that of any process it spawned) and the V8 heap in use from the metrics
 * listener (nodejs_heap_size_used_bytes) at ready (/readyz 200), after IDLE_SECONDS (default 60)
 * idle, halfway through and at the end of LOAD_SECONDS (default 300) of mixed load at
 * LOAD_CONNECTIONS (default 8), and IDLE_SECONDS after it:
 * token issue then validation of that token (client API), sign-in (POST /api/auth/login, bcrypt
 * cost 4) and GET /login, in turn on every connection. Goals: RSS after load ≤ 1.3 × idle, and the
 * end of the load not above its halfway point (not climbing).
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) names the server;
 * MEMORY_DATABASES (`embedded postgres`, the default, or either) which runs to make. Each reading
 * also gives the process's threads and the main isolate's heap committed and its young generation
 * (new space), from the metrics listener.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { freePort } from '../test/helpers/http.ts';
import { adminCli, benchDatabase, benchServiceEnv, DEFAULT_ADMIN_URL, NODE_FLAGS, ROOT, stopProcess } from './support.ts';

const IDLE_SECONDS = Number(process.env.IDLE_SECONDS ?? 60);
const LOAD_SECONDS = Number(process.env.LOAD_SECONDS ?? 300);
const CONNECTIONS = Number(process.env.LOAD_CONNECTIONS ?? 8);
/** Which databases to measure, in order: `embedded`, `postgres` or both (the default). */
const DATABASES = (process.env.MEMORY_DATABASES ?? 'embedded postgres').split(/\s+/).filter(Boolean);
for (const name of DATABASES) {
  if (name !== 'embedded' && name !== 'postgres') throw new Error(`MEMORY_DATABASES: ${name} is neither embedded nor postgres`);
}
const adminUrl = process.env.DATABASE_URL ?? DEFAULT_ADMIN_URL;
const MB = 1024 * 1024;
const PASSWORD = 'quiet harbor lantern 42';

/** VmRSS of `pid` in bytes (0 when it is gone). */
function rssOf(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** The processes `pid` spawned, and theirs, from /proc/PID/task/TID/children. */
function descendants(pid: number): number[] {
  const found: number[] = [];
  let tasks: string[] = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return found;
  }
  for (const tid of tasks) {
    let children = '';
    try {
      children = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8');
    } catch {
      continue;
    }
    for (const c of children.trim().split(/\s+/).filter(Boolean).map(Number)) found.push(c, ...descendants(c));
  }
  return found;
}

/** The number of threads of `pid` (0 when it is gone). */
function threadsOf(pid: number): number {
  try {
    return Number(/Threads:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** RSS, with the V8 heap's parts as the metrics listener reports them (the main thread's isolate). */
interface Reading { rss: number; children: number; threads: number; heap: number; heapTotal: number; newSpace: number }

/** One gauge from the metrics listener's text, NaN when it is not there. */
function gauge(text: string, name: string): number {
  const m = new RegExp(`^${name.replace(/[{}]/g, '\\$&')}\\s+([\\d.e+]+)`, 'm').exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

async function read(pid: number, metricsPort?: number): Promise<Reading> {
  const text = metricsPort === undefined ? '' : await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text(), () => '');
  const children = descendants(pid).reduce((sum, c) => sum + rssOf(c), 0);
  return {
    rss: rssOf(pid), children, threads: threadsOf(pid),
    heap: gauge(text, 'nodejs_heap_size_used_bytes'),
    heapTotal: gauge(text, 'nodejs_heap_size_total_bytes'),
    newSpace: gauge(text, 'nodejs_heap_space_size_total_bytes{space="new"}'),
  };
}

/** Spawns `args` under node and waits (60 s at most) until GET `probe` on `port` answers 200. */
async function launch(args: string[], env: Record<string, string>, port: number, probe: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'inherit'] });
  let exited: number | null = null;
  child.once('exit', (code) => (exited = code ?? -1));
  const deadline = Date.now() + 60_000;
  while (exited === null && Date.now() < deadline) {
    if (await fetch(`http://127.0.0.1:${port}${probe}`).then((r) => r.status === 200, () => false)) return child;
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGTERM');
  throw new Error(exited === null ? `${args.join(' ')} did not become ready within 60 s` : `${args.join(' ')} exited ${exited}`);
}

const sleep = (s: number) => new Promise((r) => setTimeout(r, s * 1000));

/** The mixed load: issue, validate that token, sign in, GET /login, in turn on every connection. */
async function mixedLoad(base: string, creds: { client_id: string; client_secret: string }, seconds: number): Promise<{ requests: number; non2xx: number; errors: number }> {
  const json = { 'content-type': 'application/json' };
  const result = await autocannon({
    url: base, connections: CONNECTIONS, duration: seconds,
    requests: [
      {
        method: 'POST', path: '/api/sso/token', headers: json, body: JSON.stringify({ ...creds, username: 'bench' }),
        onResponse: (status: number, body: string, context: Record<string, unknown>) => {
          if (status === 200) context.token = JSON.parse(body).token;
        },
      },
      {
        method: 'POST', path: '/api/sso/validate', headers: json,
        setupRequest: (req: any, context: Record<string, unknown>) => ({ ...req, body: JSON.stringify({ ...creds, token: context.token ?? 'none' }) }),
      },
      { method: 'POST', path: '/api/auth/login', headers: json, body: JSON.stringify({ login: 'bench', password: PASSWORD }) },
      { method: 'GET', path: '/login' },
    ],
  } as autocannon.Options);
  return { requests: result.requests.total, non2xx: result.non2xx, errors: result.errors };
}

interface Row { run: string; at: string; 'rss MB': number; 'children MB': number; threads: number; 'heap used MB': number; 'heap MB': number; 'new space MB': number; note: string }
const rows: Row[] = [];
const mb = (n: number) => (Number.isNaN(n) ? Number.NaN : Math.round(n / MB));
const push = (run: string, at: string, r: Reading, note = '') => rows.push({
  run, at, 'rss MB': mb(r.rss + r.children), 'children MB': mb(r.children), threads: r.threads,
  'heap used MB': mb(r.heap), 'heap MB': mb(r.heapTotal), 'new space MB': mb(r.newSpace), note,
});

interface Readings { idle: number; halfway: number; loaded: number; settled: number }

/** One service run: ready, idle, load (read halfway and at its end), idle again; RSS with children at each. */
async function measureService(run: string, env: Record<string, string>): Promise<Readings> {
  const port = await freePort();
  const metricsPort = await freePort();
  const child = await launch([...NODE_FLAGS, 'scripts/launch.mjs', 'server'], { ...env, METRICS_PORT: String(metricsPort) }, port, '/readyz');
  const pid = child.pid!;
  try {
    push(run, 'ready', await read(pid, metricsPort));
    await sleep(IDLE_SECONDS);
    const idle = await read(pid, metricsPort);
    push(run, `idle ${IDLE_SECONDS} s`, idle);
    const creds = JSON.parse(env.BENCH_CREDS);
    // the load in two halves, read after each: climbing is the second reading above the first
    const half = Math.max(1, Math.round(LOAD_SECONDS / 2));
    const first = await mixedLoad(`http://127.0.0.1:${port}`, creds, half);
    const halfway = await read(pid, metricsPort);
    push(run, `after ${half} s load`, halfway, `${first.requests} req, ${first.non2xx} non-2xx, ${first.errors} errors`);
    const second = await mixedLoad(`http://127.0.0.1:${port}`, creds, LOAD_SECONDS - half || 1);
    const loaded = await read(pid, metricsPort);
    push(run, `after ${LOAD_SECONDS} s load`, loaded, `${second.requests} req more, ${second.non2xx} non-2xx, ${second.errors} errors`);
    // then as long idle again: what stays (bcrypt's threads end after 30 s idle)
    await sleep(IDLE_SECONDS);
    const settled = await read(pid, metricsPort);
    push(run, `${IDLE_SECONDS} s after the load`, settled);
    const total = (r: Reading) => r.rss + r.children;
    return { idle: total(idle), halfway: total(halfway), loaded: total(loaded), settled: total(settled) };
  } finally {
    await stopProcess(child);
  }
}

/** The client and the user `bench` (bcrypt cost 4), through the admin command line. */
function benchClient(env: Record<string, string>): string {
  const client = adminCli(env.DATABASE_URL, ['client', 'create', '--name', 'Bench', '--callback-url', 'https://bench.example/cb', '--allow-ip', '127.0.0.1'], env);
  adminCli(env.DATABASE_URL, ['user', 'create', '--username', 'bench', '--email', 'bench@example.com', '--password', PASSWORD], env);
  return JSON.stringify({ client_id: client.client_id, client_secret: client.client_secret });
}

function verdict(name: string, r: Readings, idleGoal: number): string {
  return `${name}: idle ${Math.round(r.idle / MB)} MB (goal ≤ ${idleGoal}); after load / idle = ${(r.loaded / r.idle).toFixed(2)} (goal ≤ 1.3); `
    + `end / halfway of the load = ${(r.loaded / r.halfway).toFixed(2)} (climbing above 1); settled / idle = ${(r.settled / r.idle).toFixed(2)}`;
}

async function measureEmbedded(): Promise<string> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-mem-'));
  try {
    const env = benchServiceEnv('', { DATA_DIR: dataDir });
    env.BENCH_CREDS = benchClient(env);
    return verdict('embedded', await measureService('embedded (PGlite)', env), 300);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function measurePostgres(): Promise<string> {
  const db = await benchDatabase(adminUrl, 'bench_mem');
  try {
    const env = benchServiceEnv(db.url);
    env.BENCH_CREDS = benchClient(env);
    return verdict('PostgreSQL', await measureService('PostgreSQL', env), 120);
  } finally {
    await db.drop();
  }
}

async function main(): Promise<void> {
  // built now: the start script runs src/ through tsx when it is newer than dist/, which is not what is deployed
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'inherit' });
  const verdicts: string[] = [];

  // the reference: a bare node:http server with the same flags, in this run
  const refPort = await freePort();
  const ref = await launch([...NODE_FLAGS, '-e', "require('http').createServer((q,s)=>s.end('ok')).listen(process.env.PORT,'127.0.0.1')"], {}, refPort, '/');
  push('reference: node -e http server', 'ready', await read(ref.pid!));
  await stopProcess(ref);

  if (DATABASES.includes('embedded')) verdicts.push(await measureEmbedded());
  if (DATABASES.includes('postgres')) verdicts.push(await measurePostgres());

  console.log(`\nnode flags: ${NODE_FLAGS.join(' ') || '(none)'}; idle ${IDLE_SECONDS} s, load ${LOAD_SECONDS} s at ${CONNECTIONS} connections`);
  console.table(rows);
  for (const v of verdicts) console.log(v);
}

await main();
