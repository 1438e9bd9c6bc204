/**
 * Does bcrypt block the event loop? Starts the real service (BCRYPT_COST 12 unless set),
 * fires 20 correct logins at once and, while they run, asks GET /healthz back to back.
 * Prints the /healthz latencies and the event loop's worst delay as one JSON line.
 * The issue asks for /healthz within 100 ms while 20 logins run.
 *
 *   npm run bench:login                              embedded database
 *   TEST_DATABASE_URL=postgres://... npm run bench:login   PostgreSQL (own database, dropped after)
 *
 * npm run bench:login loads scripts/pool-priority.cjs first, as npm start does, so bcrypt hashes
 * on libuv's pool at nice +10; `npx tsx bench/login-eventloop.ts` runs it at the event loop's
 * priority, for comparison (the output's bcrypt_pool_nice says which).
 */
import { mkdtemp } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import pino from 'pino';
import { bcryptPriority } from '../src/auth/passwords.ts';
import { loadConfig } from '../src/config.ts';
import { startService } from '../src/service.ts';
import { createTestDatabase } from '../test/helpers/db.ts';
import { quantile } from './support.ts';

const LOGINS = Number(process.env.BENCH_LOGINS ?? 20);
const PASSWORD = 'correct horse battery staple';

const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-bench-'));
const config = loadConfig({
  NODE_ENV: 'development',
  PORT: '0',
  HOST: '127.0.0.1',
  DATA_DIR: dataDir,
  LOG_LEVEL: 'silent',
  BCRYPT_COST: process.env.BCRYPT_COST ?? '12',
  RATE_LIMIT_LOGIN_PER_MIN: '100000',
  JWT_SECRET: 'bench-secret-bench-secret-bench-secret-0123',
  SESSION_SECRET: 'bench-session-secret-bench-session-secret-01',
});
const database = await createTestDatabase();
const service = await startService(config, database.db, pino({ level: 'silent' }));
const agent = new http.Agent({ keepAlive: true });

function call(method: string, urlPath: string, body?: unknown): Promise<number> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const req = http.request(service.url + urlPath, {
      method, agent,
      headers: payload ? { 'content-type': 'application/json', 'content-length': String(payload.length) } : {},
    }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

try {
  await service.services.users.createUser({ username: 'bench-user', email: 'bench@example.com', password: PASSWORD }, { via: 'cli' });
  const login = () => call('POST', '/api/auth/login', { login: 'bench-user', password: PASSWORD });
  if ((await login()) !== 200) throw new Error('warm-up login failed');
  await call('GET', '/healthz');

  /** Probes /healthz back to back while `work` runs; latencies and the loop's worst delay. */
  async function probeDuring(work: () => Promise<unknown>) {
    const loop = monitorEventLoopDelay({ resolution: 5 });
    const latencies: number[] = [];
    let running = true;
    loop.enable();
    const prober = (async () => {
      while (running) {
        const started = performance.now();
        await call('GET', '/healthz');
        latencies.push(performance.now() - started);
      }
    })();
    const started = performance.now();
    const result = await work();
    const elapsed = performance.now() - started;
    running = false;
    await prober;
    loop.disable();
    latencies.sort((a, b) => a - b);
    const pick = (q: number) => quantile(latencies, q);
    const round = (n: number) => Math.round(n * 10) / 10;
    return {
      result,
      figures: {
        ms: round(elapsed),
        healthz_samples: latencies.length,
        healthz_p50_ms: round(pick(0.5)),
        healthz_p99_ms: round(pick(0.99)),
        healthz_max_ms: round(latencies.at(-1) ?? Number.NaN),
        healthz_over_100ms: latencies.filter((l) => l >= 100).length,
        event_loop_delay_max_ms: round(loop.max / 1e6),
      },
    };
  }

  const during = await probeDuring(() => Promise.all(Array.from({ length: LOGINS }, login)));
  // the same probing with nothing else to do, for as long: what this machine gives at the moment
  const idle = await probeDuring(() => new Promise((r) => setTimeout(r, during.figures.ms)));
  const statuses = during.result as number[];
  console.log(JSON.stringify({
    database: database.db.kind,
    bcrypt_cost: config.BCRYPT_COST,
    bcrypt_pool_nice: bcryptPriority().nice,
    logins: LOGINS,
    logins_ok: statuses.filter((s) => s === 200).length,
    during_logins: during.figures,
    idle_baseline: idle.figures,
    load_average_1m: Math.round(os.loadavg()[0] * 100) / 100,
    within_100ms: during.figures.healthz_max_ms < 100,
  }));
} finally {
  agent.destroy();
  await service.stop();
  await database.drop();
}
