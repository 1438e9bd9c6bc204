/**
 * Does the audit export stream with flat memory? Starts the real service in this process,
 * inserts BENCH_ROWS audit rows (default 100,000) with one INSERT … SELECT generate_series,
 * then downloads GET /api/admin/audit?format=csv and ?format=ndjson over HTTP while sampling
 * process.memoryUsage() every 5 ms. Prints one JSON line per format: rows, bytes, and the
 * peak RSS and heap against the baseline taken just before the export.
 *
 *   node --expose-gc --import tsx bench/audit-export.ts                         embedded database
 *   TEST_DATABASE_URL=postgres://... node --expose-gc --import tsx bench/audit-export.ts   PostgreSQL
 *
 * The HTTP client here only counts lines and drops the bytes, so what grows is the service.
 */
import { mkdtemp } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import { startService } from '../src/service.ts';
import { createTestDatabase } from '../test/helpers/db.ts';

const ROWS = Number(process.env.BENCH_ROWS ?? 100_000);
const MB = 1024 * 1024;
const gc = (globalThis as { gc?: () => void }).gc;

const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-bench-'));
const config = loadConfig({
  NODE_ENV: 'development', PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'silent', BCRYPT_COST: '4',
  RATE_LIMIT_USER_PER_MIN: '100000', RATE_LIMIT_LOGIN_PER_MIN: '100000',
  JWT_SECRET: 'bench-secret-bench-secret-bench-secret-0123',
  SESSION_SECRET: 'bench-session-secret-bench-session-secret-01',
});
const database = await createTestDatabase();
const service = await startService(config, database.db, pino({ level: 'silent' }));

function download(urlPath: string, cookie: string): Promise<{ status: number; lines: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    http.get(service.url + urlPath, { headers: { cookie } }, (res) => {
      let lines = 0;
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, lines, bytes }));
      res.on('error', reject);
    }).on('error', reject);
  });
}

try {
  await service.services.users.createUser({ username: 'bench-admin', email: 'admin@example.com', password: 'quiet harbor lantern 42', role: 'admin' }, { via: 'cli' });
  const login = await fetch(`${service.url}/api/auth/login`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ login: 'bench-admin', password: 'quiet harbor lantern 42' }),
  });
  const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];
  const started = performance.now();
  await database.db.query(
    `INSERT INTO audit_log (action, outcome, username, client_id, ip_address, user_agent, details)
     SELECT 'bench.export', CASE WHEN g % 10 = 0 THEN 'failure' ELSE 'success' END, 'user' || (g % 500), 'client-' || (g % 7),
            '10.0.' || (g % 250) || '.' || (g % 200), 'Mozilla/5.0 (bench) agent ' || g, jsonb_build_object('n', g, 'reason', 'bench row')
     FROM generate_series(1, $1::int) AS g`,
    [ROWS],
  );
  // fresh statistics, as autovacuum would have them on a real log: without them the planner
  // guesses a few rows and sorts every remaining row per batch instead of walking an index
  await database.db.query('ANALYZE audit_log');
  const insertMs = Math.round(performance.now() - started);

  for (const format of ['csv', 'ndjson']) {
    gc?.();
    const base = process.memoryUsage();
    const peak = { rss: base.rss, heapUsed: base.heapUsed, external: base.external + base.arrayBuffers };
    const timer = setInterval(() => {
      const m = process.memoryUsage();
      peak.rss = Math.max(peak.rss, m.rss);
      peak.heapUsed = Math.max(peak.heapUsed, m.heapUsed);
      peak.external = Math.max(peak.external, m.external + m.arrayBuffers);
    }, 5);
    const t0 = performance.now();
    const result = await download(`/api/admin/audit?action=bench.export&format=${format}`, cookie);
    clearInterval(timer);
    console.log(JSON.stringify({
      bench: 'audit-export',
      database: database.db.kind,
      format,
      status: result.status,
      rows: format === 'csv' ? result.lines - 1 : result.lines,
      export_mb: +(result.bytes / MB).toFixed(1),
      seconds: +((performance.now() - t0) / 1000).toFixed(2),
      baseline_rss_mb: +(base.rss / MB).toFixed(1),
      peak_rss_mb: +(peak.rss / MB).toFixed(1),
      rss_growth_mb: +((peak.rss - base.rss) / MB).toFixed(1),
      baseline_heap_mb: +(base.heapUsed / MB).toFixed(1),
      peak_heap_mb: +(peak.heapUsed / MB).toFixed(1),
      heap_growth_mb: +((peak.heapUsed - base.heapUsed) / MB).toFixed(1),
      insert_ms: insertMs,
    }));
  }
} finally {
  await service.stop();
  await database.drop();
}
