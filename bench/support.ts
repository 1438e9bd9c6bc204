/** What the benchmarks share: a database of their own, the service as a process, the CLI. */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { freePort } from '../test/helpers/http.ts';

export const ROOT = path.resolve(fileURLToPath(new URL('../', import.meta.url)));
/**
 * The checkout whose service and admin command line are measured: this one, or another named by
 * BENCH_SERVICE_ROOT (an older commit's worktree), so that one benchmark script measures both
 * sides of a before/after pair. The ceiling and the limit always run from this checkout.
 */
export const SERVICE_ROOT = process.env.BENCH_SERVICE_ROOT ? path.resolve(process.env.BENCH_SERVICE_ROOT) : ROOT;
export const DEFAULT_ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * The node options the service is started with: those `npm start` gives it (package.json of
 * the checkout measured), so the benchmark runs the service as it is deployed; every process
 * the benchmark starts (the ceiling and the limit too) runs with them, so the figures compare
 * like with like. BENCH_NODE_FLAGS (space-separated) overrides them.
 */
export const NODE_FLAGS: readonly string[] = process.env.BENCH_NODE_FLAGS !== undefined
  ? process.env.BENCH_NODE_FLAGS.split(/\s+/).filter(Boolean)
  : startFlags(JSON.parse(readFileSync(path.join(SERVICE_ROOT, 'package.json'), 'utf8')).scripts?.start ?? '');

/** The options between `node` and the script in an npm script such as `node --a=1 scripts/launch.mjs server`. */
export function startFlags(script: string): string[] {
  const words = script.trim().split(/\s+/);
  if (words[0] !== 'node') return [];
  const flags: string[] = [];
  for (const word of words.slice(1)) {
    if (!word.startsWith('--')) break;
    flags.push(word);
  }
  return flags;
}

/**
 * Starts an entry point as its own process, with NODE_FLAGS, and waits (30 s at most) until
 * GET `probe` answers: TypeScript through tsx, JavaScript (the compiled service) with plain
 * node. With BENCH_CPU_PROF=dir set, the process writes a V8 CPU profile there when it exits;
 * with BENCH_CHILD_STDOUT=1 its standard output is shown (with BENCH_NODE_FLAGS=--trace-gc-nvp,
 * V8's account of every collection, as bench/gc-survival.ts reads it).
 */
export async function startProcess(
  file: string, env: Record<string, string>, probe: string, cwd = ROOT,
  options: { nodeFlags?: readonly string[]; stdout?: 'pipe'; onSpawn?: (child: ChildProcess) => void } = {},
): Promise<{ child: ChildProcess; port: number }> {
  const port = await freePort(); // chosen here: at LOG_LEVEL=warn the service does not log its own
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  const loader = file.endsWith('.ts') ? ['--import', 'tsx'] : [];
  const stdout = options.stdout ?? (process.env.BENCH_CHILD_STDOUT ? 'inherit' : 'ignore');
  const child = spawn(process.execPath, [...NODE_FLAGS, ...(options.nodeFlags ?? []), ...profile, ...loader, file], { cwd, env: { ...process.env, ...env, PORT: String(port) }, stdio: ['ignore', stdout, 'inherit'] });
  options.onSpawn?.(child);
  let exited: number | null = null;
  child.once('exit', (code) => (exited = code ?? -1));
  const deadline = Date.now() + 30_000;
  while (exited === null && Date.now() < deadline) {
    if (await fetch(`http://127.0.0.1:${port}${probe}`).then((r) => r.ok, () => false)) return { child, port };
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGTERM');
  throw new Error(exited === null ? `${file} did not start within 30 s` : `${file} exited ${exited}`);
}

/**
 * The service's entry point as it is deployed: `npm run build` (tsc) in SERVICE_ROOT, then
 * dist/server.js, run by plain node, as `npm start` runs it in production (scripts/launch.mjs)
 * and the Docker image does. Under tsx the same code costs more: esbuild's keepNames wraps
 * every function made per request in a `__name` call, among others. BENCH_FROM_SOURCE=1 runs
 * src/server.ts through tsx instead (what `npm start` does outside production before a build).
 */
export function serviceEntry(): string {
  if (process.env.BENCH_FROM_SOURCE === '1') return 'src/server.ts';
  execFileSync(process.execPath, [path.join(SERVICE_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], { cwd: SERVICE_ROOT, stdio: 'inherit' });
  return 'dist/server.js';
}

/**
 * Stops a process started by startProcess: SIGTERM, then waits (10 s at most) for it to exit,
 * so that it has finished with its database and written its CPU profile.
 */
export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000).unref())]);
}

/** POSTs JSON and returns the parsed answer. */
export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<any> {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return r.json();
}

/** A fresh database on the server `adminUrl` names, dropped by `drop()`. */
export async function benchDatabase(adminUrl: string, prefix: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    },
  };
}

/**
 * Has PostgreSQL finish what earlier runs left it (VACUUM ANALYZE of `databaseUrl`, then a
 * checkpoint where the role may ask for one), so that the next run does not share the machine with
 * the cleanup of their hundreds of thousands of rows (a checkpoint forced by their WAL, autovacuum
 * where it is on).
 */
export async function settleDatabase(databaseUrl: string): Promise<{ checkpointed: boolean }> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query('VACUUM (ANALYZE)');
    return { checkpointed: await checkpoint(client) };
  } finally {
    await client.end();
  }
}

/** CHECKPOINT, where the role may (superuser or pg_checkpoint): whether it ran. */
export async function checkpoint(client: pg.Client): Promise<boolean> {
  return client.query('CHECKPOINT').then(() => true, () => false);
}

/** The service's environment for a benchmark: its own secrets, quiet logs, limits out of the way. */
export function benchServiceEnv(databaseUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl, HOST: '127.0.0.1', NODE_ENV: 'development', LOG_LEVEL: 'warn',
    JWT_SECRET: randomBytes(32).toString('hex'), SESSION_SECRET: randomBytes(32).toString('hex'),
    TOKEN_TTL_SECONDS: '1800', RATE_LIMIT_VALIDATE_PER_MIN: '100000000', RATE_LIMIT_TOKEN_PER_MIN: '100000000', RATE_LIMIT_LOGIN_PER_MIN: '100000000',
    RATE_LIMIT_USER_PER_MIN: '100000000', REDIS_URL: '', DATA_DIR: path.join(ROOT, 'data', 'bench'),
    ...extra,
  };
}

/** Runs an admin command with --json on `databaseUrl` and returns its document. */
export function adminCli(databaseUrl: string, args: string[], env: Record<string, string> = {}): any {
  const out = execFileSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args, '--json'], {
    cwd: SERVICE_ROOT, env: { ...process.env, DATABASE_URL: databaseUrl, BCRYPT_COST: '4', LOG_LEVEL: 'silent', ...env },
  });
  return JSON.parse(out.toString());
}

/**
 * The benchmarks' client system (allowed from 127.0.0.1) and their user `bench`, through the
 * admin command line: the client's credentials and the user's id.
 */
export function createBenchClient(databaseUrl: string): { creds: { client_id: string; client_secret: string }; userId: number } {
  const client = adminCli(databaseUrl, ['client', 'create', '--name', 'Bench', '--callback-url', 'https://bench.example/cb', '--allow-ip', '127.0.0.1']);
  const user = adminCli(databaseUrl, ['user', 'create', '--username', 'bench', '--email', 'bench@example.com', '--password', 'quiet harbor lantern 42']);
  return { creds: { client_id: client.client_id, client_secret: client.client_secret }, userId: user.id };
}

/**
 * The SQL of a version-7 UUID for the time `t`, the shape of the jtis the service issues
 * (src/sso/service.ts newTokenId): 48 bits of milliseconds, the version, random bits, the
 * variant. PostgreSQL 15 has no uuidv7().
 */
export const uuidv7At = (t: string) =>
  `(lpad(to_hex(floor(extract(epoch FROM ${t}) * 1000)::bigint), 12, '0') || '7' || substr(md5(random()::text), 1, 3) || '8' || substr(md5(random()::text), 1, 15))::uuid`;

/**
 * Used tokens of user `userId` at `clientId` past the token retention: token g, for g from `from`
 * to `to`, was issued 3 days, a minute and g seconds ago and used 30 seconds later, as issue and
 * validation leave them (version-7 jtis of its issue time). The pruning benches' token backlog.
 */
export function writeUsedTokens(sql: pg.Client, from: number, to: number, userId: number, clientId: string): Promise<unknown> {
  return sql.query(
    `INSERT INTO sso_tokens (jti, user_id, client_id, username, ip_address, issued_at, expires_at, used_at)
     SELECT ${uuidv7At("t - interval '1 minute'")}, $3, $4, 'bench', '127.0.0.1', t - interval '1 minute', t, t - interval '30 seconds'
     FROM generate_series($1::int, $2::int) g, LATERAL (SELECT now() - interval '3 days' - g * interval '1 second' AS t) x`,
    [from, to, userId, clientId],
  );
}

/**
 * `count` single-use tokens of user `bench` for the client `clientId`, written as token issue
 * writes them, for the limit (bench/limit.ts validates a token by its jti): their jtis.
 */
export async function writeLimitTokens(databaseUrl: string, clientId: string, count: number): Promise<string[]> {
  const sql = new pg.Client({ connectionString: databaseUrl });
  await sql.connect();
  try {
    const { rows } = await sql.query<{ jti: string }>(
      `INSERT INTO sso_tokens (jti, user_id, client_id, username, ip_address, issued_at, expires_at)
       SELECT ${uuidv7At('now()')}, u.id, $1, u.username, '127.0.0.1', now(), now() + interval '1 day'
       FROM users u, generate_series(1, $2::int) WHERE u.username = 'bench' RETURNING jti`,
      [clientId, count],
    );
    await sql.query('ANALYZE sso_tokens');
    return rows.map((r) => r.jti);
  } finally {
    await sql.end();
  }
}

/**
 * Runs autocannon and returns its result with the seconds from the start to the last answer:
 * autocannon's own req/s is a mean of whole seconds, and a run given an `amount` ends only at
 * its next one-second tick. `onBody` sees every answer (the first request's own onResponse is
 * replaced); `onLatency` every answer's status and time in milliseconds, unrounded (autocannon's
 * own histogram keeps whole milliseconds).
 */
export async function loadUntilLastAnswer(
  options: autocannon.Options,
  onBody?: (status: number, body: string) => void,
  onLatency?: (status: number, ms: number) => void,
): Promise<{ result: autocannon.Result; seconds: number }> {
  const base = (options.requests as autocannon.Request[] | undefined)?.[0] ?? {};
  const started = performance.now();
  let last = started;
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon({
      ...options,
      requests: [{
        ...base,
        onResponse: (status: number, body: string) => {
          last = performance.now();
          onBody?.(status, body);
        },
      }],
    } as autocannon.Options, (err, r) => (err ? reject(err) : resolve(r)));
    if (onLatency) instance.on('response', (_client, status, _bytes, ms) => onLatency(status, ms));
  });
  return { result, seconds: (last - started) / 1000 };
}

/** The `q` quantile of ascending `sorted` (the sample at rank floor(q * n); NaN when empty). */
/** The median of `values` (in any order): the mean of the middle two when their number is even. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export function quantile(sorted: readonly number[], q: number): number {
  return sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

/** Clock ticks per second of /proc/PID/stat's CPU times (USER_HZ: 100 on Linux). */
const CLOCK_TICKS = 100;

/** CPU time (user + system, all threads) a process has used so far, in microseconds (Linux). */
export function cpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state); utime and stime are fields 14 and 15
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS;
}

/**
 * The machine's CPU time so far, in clock ticks, from the first line of /proc/stat: `idle`
 * (idle and waiting for I/O) and `all` (user, nice, system, idle, iowait, irq, softirq, steal;
 * guest time is already counted in user and nice).
 */
export function machineCpuTicks(): { idle: number; all: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0];
  const [user, nice, system, idle, iowait, irq, softirq, steal] = line.trim().split(/\s+/).slice(1, 9).map(Number);
  return { idle: idle + iowait, all: user + nice + system + idle + iowait + irq + softirq + steal };
}

/**
 * The share of the machine's CPU time (every core) left idle since `before` (machineCpuTicks):
 * a run that leaves cores idle was held back by hand-offs between the processes, not by the
 * CPU they need.
 */
export function idleShareSince(before: { idle: number; all: number }): number {
  const now = machineCpuTicks();
  return (now.idle - before.idle) / Math.max(1, now.all - before.all);
}

/**
 * CPU time used so far by each local PostgreSQL process (their name is `postgres`), in
 * microseconds by pid: the database's share of a request, for telling where a run's CPU goes.
 * Empty when none can be seen (a server on another machine or in a container).
 */
export function databaseCpuMicros(): Map<number, number> {
  const byPid = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    if (stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) !== 'postgres') continue;
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime, then cutime and cstime: the postmaster reaps every backend and worker,
    // so one that ended meanwhile (autovacuum, a closed pool connection) is counted there
    const [utime, stime, cutime, cstime] = fields.slice(11, 15).map(Number);
    byPid.set(Number(entry), ((utime + stime + cutime + cstime) * 1e6) / CLOCK_TICKS);
  }
  return byPid;
}

/**
 * The CPU time PostgreSQL used between two readings of databaseCpuMicros: the processes alive
 * at the second, and through the postmaster's children's times those that ended meanwhile.
 * Every PostgreSQL server on the machine counts. NaN when no PostgreSQL process could be seen.
 */
export function databaseCpuSince(before: Map<number, number>): number {
  const after = databaseCpuMicros();
  if (after.size === 0) return Number.NaN;
  // totals, not per process: one that ended took its time out of `after` and into its
  // parent's children's times, for its whole life, of which `before` holds the earlier part
  let used = 0;
  for (const micros of after.values()) used += micros;
  for (const micros of before.values()) used -= micros;
  return used;
}

/**
 * Asks `url` on one keep-alive connection until stop(), a new request every `everyMs` (or at
 * once when the last answer took longer; 0: back to back); latency figures in ms. A paced probe
 * is what a load balancer's health check is; back to back, the probe and its own answers take
 * a good part of a core from what it watches.
 */
export function probeLatencies(url: string, everyMs = 0): { stop(): Promise<{ count: number; p50: number; p99: number; max: number }> } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const latencies: number[] = [];
  let running = true;
  const ask = () => new Promise<void>((resolve) => {
    http.get(url, { agent }, (res) => {
      res.resume();
      res.on('end', resolve);
    }).on('error', () => resolve());
  });
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      await ask();
      const took = performance.now() - started;
      latencies.push(took);
      if (everyMs > took && running) await new Promise((r) => setTimeout(r, everyMs - took));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      agent.destroy();
      latencies.sort((a, b) => a - b);
      const at = (q: number) => Math.round(quantile(latencies, q) * 10) / 10;
      return { count: latencies.length, p50: at(0.5), p99: at(0.99), max: at(1) };
    },
  };
}
