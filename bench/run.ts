/**
 * npm run bench: the hot paths beside what this machine can do, measured in one run.
 *
 * Three processes serve side by side: the service as it is deployed (compiled by `npm run
 * build`, dist/server.js under plain node; BENCH_FROM_SOURCE=1 runs src/server.ts through tsx),
 * on a fresh PostgreSQL database, a bare Express JSON handler (bench/ceiling.ts: what Express itself costs) and the
 * plain node:http + pg single-use validation (bench/limit.ts: the practical limit of the
 * validation design). In rounds (BENCH_ROUNDS, default 3) autocannon drives, at 50 connections
 * (BENCH_CONNECTIONS) for BENCH_SECONDS (default 10) each: the ceiling, the limit, token issue,
 * then validation of exactly the tokens that round issued. For every run it prints req/s,
 * latency and the serving process's CPU time per request (from /proc/PID/stat: user + system,
 * every thread), the steadiest figure on a busy machine, beside the CPU time per request of
 * every local PostgreSQL process (`db`) and of this process, the load generator (`load`):
 * the machine's two cores are shared by all three, so what one request costs all together
 * bounds the throughput; and the share of the machine's CPU time nobody used (`idle`): where
 * the cores were not full, the hand-offs between the processes held the run back, not the
 * CPU they need. Then logins at bcrypt cost 12 against
 * raw bcrypt.compare at the same cost and the same number in flight (BENCH_LOGIN_SECONDS,
 * default 20, each), and the same login storm again with /healthz asked every 10 ms
 * (BENCH_PROBE_EVERY_MS) for the event loop's latency: in one run the probes' own CPU (this
 * process's and the service's) was taken from bcrypt, which the raw compares did not pay. The
 * goals are ratios of figures taken in the same run.
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) names the server; the
 * benchmark creates and drops its own database there.
 */
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import bcrypt from 'bcrypt';
import type autocannon from 'autocannon';
import {
  adminCli, benchDatabase, benchServiceEnv, cpuMicros, createBenchClient, databaseCpuMicros, databaseCpuSince, DEFAULT_ADMIN_URL, idleShareSince, loadUntilLastAnswer, machineCpuTicks, NODE_FLAGS,
  postJson as post, probeLatencies, SERVICE_ROOT, serviceEntry, settleDatabase, startProcess as start, stopProcess, writeLimitTokens, median,
} from './support.ts';

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
/** Every measurement runs this many times, alternating: the machine's speed drifts. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** Logins (and raw compares) in flight at once. */
const LOGINS_IN_FLIGHT = Number(process.env.BENCH_LOGINS ?? 8);
const BCRYPT_COST = Number(process.env.BENCH_BCRYPT_COST ?? 12);
/** The libuv pool's threads, where bcrypt runs (4 unless UV_THREADPOOL_SIZE says otherwise). */
const POOL_THREADS = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
/** Logins take a quarter of a second each: a longer run than the others, or the count is a handful. */
const LOGIN_SECONDS = Number(process.env.BENCH_LOGIN_SECONDS ?? 20);
/** /healthz is asked every this many ms during the logins (0: back to back). */
const PROBE_EVERY_MS = Number(process.env.BENCH_PROBE_EVERY_MS ?? 10);
const adminUrl = process.env.DATABASE_URL ?? DEFAULT_ADMIN_URL;
/**
 * Tokens written for the limit's rounds: room for 30,000 validations a second. A limit that ran
 * out would answer 400s (no token), cheaper than validations, and look faster than it is (reported below).
 */
const LIMIT_TOKENS = Number(process.env.BENCH_LIMIT_TOKENS ?? 30_000 * DURATION * ROUNDS);

interface Figures {
  run: string;
  'req/s': number;
  'cpu µs/req': number;
  /** Every local PostgreSQL process's CPU time per answer (NaN: none seen). */
  'db µs/req': number;
  /** This process's (autocannon's) CPU time per answer. */
  'load µs/req': number;
  /** The share of the machine's CPU time (both cores) nobody used during the run. */
  'idle %': number;
  p50_ms: number;
  p99_ms: number;
  non2xx: number;
  errors: number;
  requests: number;
}

/**
 * Runs autocannon against the process `pid` serves and reports req/s as answers / (last answer
 * - start) (loadUntilLastAnswer), and the CPU time per answer of that process, of PostgreSQL
 * and of this process.
 */
async function measure(run: string, pid: number, options: autocannon.Options, onBody?: (status: number, body: string) => void): Promise<Figures> {
  const cpuBefore = cpuMicros(pid);
  const dbBefore = databaseCpuMicros();
  const loadBefore = process.cpuUsage();
  const machineBefore = machineCpuTicks();
  const { result: r, seconds } = await loadUntilLastAnswer(options, onBody);
  const idle = idleShareSince(machineBefore);
  const cpu = cpuMicros(pid) - cpuBefore;
  const db = databaseCpuSince(dbBefore);
  const load = process.cpuUsage(loadBefore);
  const perAnswer = (micros: number) => Math.round(micros / Math.max(1, r.requests.total));
  return {
    run,
    'req/s': Math.round(r.requests.total / seconds),
    'cpu µs/req': perAnswer(cpu),
    'db µs/req': perAnswer(db),
    'load µs/req': perAnswer(load.user + load.system),
    'idle %': Math.round(idle * 100),
    p50_ms: r.latency.p50,
    p99_ms: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors,
    requests: r.requests.total,
  };
}

const pct = (x: number) => `${(x * 100).toFixed(0)}%`;

/** bcrypt.compare with `inFlight` at once for `seconds`: compares per second. */
async function rawCompares(hash: string, password: string, inFlight: number, seconds: number): Promise<number> {
  let done = 0;
  const until = performance.now() + seconds * 1000;
  const started = performance.now();
  let last = started;
  await Promise.all(Array.from({ length: inFlight }, async () => {
    while (performance.now() < until) {
      await bcrypt.compare(password, hash);
      done++;
      last = performance.now();
    }
  }));
  return done / ((last - started) / 1000);
}

async function main() {
  const db = await benchDatabase(adminUrl, 'auth_bench');
  const children: ChildProcess[] = [];
  try {
    const entry = serviceEntry();
    const service = await start(entry, benchServiceEnv(db.url), '/readyz', SERVICE_ROOT);
    console.log(`service: ${path.join(SERVICE_ROOT, entry)}`);
    console.log(`node options of every process: ${NODE_FLAGS.join(' ') || '(none)'}`);
    children.push(service.child);
    const base = `http://127.0.0.1:${service.port}`;

    // The client, user `bench` and a user at the login cost, through the admin command line.
    const { creds } = createBenchClient(db.url);
    const password = 'quiet harbor lantern 42'; // the policy refuses a password that holds the username
    adminCli(db.url, ['user', 'create', '--username', 'login', '--email', 'login@example.com', '--password', password], { BCRYPT_COST: String(BCRYPT_COST) });
    const probe = await post(`${base}/api/sso/token`, { ...creds, username: 'bench' });
    if (!probe.token) throw new Error(`token issue failed: ${JSON.stringify(probe)}`);

    // The limit's single-use tokens: more than any round consumes.
    const limitJtis = await writeLimitTokens(db.url, creds.client_id, LIMIT_TOKENS);

    const ceiling = await start('bench/ceiling.ts', {}, '/healthz');
    children.push(ceiling.child);
    const limit = await start('bench/limit.ts', { DATABASE_URL: db.url }, '/healthz');
    children.push(limit.child);
    const json = { method: 'POST' as const, headers: { 'content-type': 'application/json' } };
    const spid = service.child.pid!;

    const rows: Figures[] = [];
    const byRound: Array<Record<'ceiling' | 'limit' | 'issue' | 'validate', Figures>> = [];
    let limitNext = 0;
    for (let round = 1; round <= ROUNDS; round++) {
      const ceilingRun = await measure(`bare Express JSON (ceiling) #${round}`, ceiling.child.pid!, {
        ...json, url: `http://127.0.0.1:${ceiling.port}/echo`, connections: CONNECTIONS, duration: DURATION,
        body: JSON.stringify({ ...creds, token: probe.token }),
      });
      const limitRun = await measure(`node:http + pg validate (limit) #${round}`, limit.child.pid!, {
        ...json, url: `http://127.0.0.1:${limit.port}/validate`, connections: CONNECTIONS, duration: DURATION,
        requests: [{ setupRequest: (req: any) => ({ ...req, body: JSON.stringify({ ...creds, token: limitJtis[limitNext++] }) }) }],
      });
      const tokens: string[] = [];
      const issueRun = await measure(`POST /api/sso/token #${round}`, spid, {
        ...json, url: `${base}/api/sso/token`, connections: CONNECTIONS, duration: DURATION,
        body: JSON.stringify({ ...creds, username: 'bench' }),
      }, (status, body) => {
        if (status === 200) tokens.push(JSON.parse(body).token);
      });
      const spare = tokens.pop()!; // validated once as a check
      const sample = await post(`${base}/api/sso/validate`, { ...creds, token: spare });
      if (sample.valid !== true) throw new Error(`validation failed: ${JSON.stringify(sample)}`);
      let next = 0;
      const validateRun = await measure(`POST /api/sso/validate #${round}`, spid, {
        ...json, url: `${base}/api/sso/validate`, connections: CONNECTIONS, amount: tokens.length,
        requests: [{ setupRequest: (req: any) => ({ ...req, body: JSON.stringify({ ...creds, token: tokens[next++] }) }) }],
      });
      rows.push(ceilingRun, limitRun, issueRun, validateRun);
      byRound.push({ ceiling: ceilingRun, limit: limitRun, issue: issueRun, validate: validateRun });
    }

    // Logins at the bcrypt cost against bcrypt itself, the same number in flight, on a database
    // that has finished with the rounds' rows.
    await settleDatabase(db.url);
    const warm = await fetch(`${base}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ login: 'login', password }) });
    if (warm.status !== 200) throw new Error(`login failed: ${warm.status} ${await warm.text()}`);
    const storm = {
      ...json, url: `${base}/api/auth/login`, connections: LOGINS_IN_FLIGHT, duration: LOGIN_SECONDS,
      body: JSON.stringify({ login: 'login', password }),
    };
    const loginRun = await measure(`POST /api/auth/login, bcrypt cost ${BCRYPT_COST}, ${LOGINS_IN_FLIGHT} in flight`, spid, storm);
    // The storm again, for the event loop's latency during it (a load balancer's paced health check).
    const healthz = probeLatencies(`${base}/healthz`, PROBE_EVERY_MS);
    const stormRun = await measure(`the same, /healthz asked every ${PROBE_EVERY_MS} ms`, spid, storm);
    const health = await healthz.stop();
    rows.push(loginRun, stormRun);
    const hash = await bcrypt.hash(password, BCRYPT_COST);
    // bcrypt itself with every pool thread busy, and with as many as the service uses (all but one)
    const raw = await rawCompares(hash, password, POOL_THREADS, LOGIN_SECONDS);
    const rawLikeService = await rawCompares(hash, password, POOL_THREADS - 1, LOGIN_SECONDS);

    console.table(rows);
    const logins = loginRun.requests / LOGIN_SECONDS;
    const ratio = (a: keyof (typeof byRound)[0], b: keyof (typeof byRound)[0]) => byRound.map((r) => r[a]['req/s'] / r[b]['req/s']);
    const vl = ratio('validate', 'limit');
    const ic = ratio('issue', 'ceiling');
    const vc = ratio('validate', 'ceiling');
    const cpu = (k: keyof (typeof byRound)[0]) => median(byRound.map((r) => r[k]['cpu µs/req']));
    console.log([
      `Medians of ${ROUNDS} rounds, ${CONNECTIONS} connections (same-run ratios; the machine's speed drifts):`,
      `  ceiling ${median(byRound.map((r) => r.ceiling['req/s']))} req/s, ${cpu('ceiling')} µs/req;  limit ${median(byRound.map((r) => r.limit['req/s']))} req/s, ${cpu('limit')} µs/req`,
      `  validate ${median(byRound.map((r) => r.validate['req/s']))} req/s, ${cpu('validate')} µs/req;  token issue ${median(byRound.map((r) => r.issue['req/s']))} req/s, ${cpu('issue')} µs/req`,
      `  validate / limit:   ${pct(median(vl))} (goal >= 75%; rounds ${vl.map(pct).join(', ')})`,
      `  validate CPU:       ${cpu('validate')} µs/req (goal <= 350)`,
      `  validate / ceiling: ${pct(median(vc))} (rounds ${vc.map(pct).join(', ')})`,
      `  issue / ceiling:    ${pct(median(ic))} (goal >= 120%; rounds ${ic.map(pct).join(', ')})`,
      `  login ${logins.toFixed(2)}/s (${LOGINS_IN_FLIGHT} in flight) vs raw bcrypt.compare at cost ${BCRYPT_COST}: ${raw.toFixed(2)}/s with ${POOL_THREADS} in flight: ${pct(logins / raw)} (goal >= 90%); `
        + `${rawLikeService.toFixed(2)}/s with ${POOL_THREADS - 1}: ${pct(logins / rawLikeService)}`,
      `  /healthz during the login storm: ${health.count} answers, p50 ${health.p50} ms, p99 ${health.p99} ms, worst ${health.max} ms (goal p99 < 20 ms); `
        + `logins meanwhile ${(stormRun.requests / LOGIN_SECONDS).toFixed(2)}/s`,
    ].join('\n'));
    const wrong = rows.filter((r) => !r.run.startsWith('node:http')).reduce((n, r) => n + r.non2xx, 0);
    if (wrong > 0) console.log(`note: ${wrong} answers of the service or the ceiling were not 2xx`);
    const limitRefused = byRound.reduce((n, r) => n + r.limit.non2xx, 0);
    if (limitRefused > 0) console.log(`note: the limit answered ${limitRefused} requests with an error (out of tokens: cheaper than a validation): raise BENCH_LIMIT_TOKENS (${LIMIT_TOKENS})`);
  } finally {
    await Promise.all(children.map(stopProcess));
    await db.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
