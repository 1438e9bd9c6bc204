/**
 * npm run bench:prune: token validation under load (autocannon, BENCH_CONNECTIONS connections)
 * on the real PostgreSQL, first with nothing to prune, then while the service prunes a backlog
 * of BENCH_PRUNE_ROWS (default 1,000,000) rows past retention, in one run. Prints the p99 of
 * both phases and their ratio (the target: the backlog costs validation at most 20% of p99).
 *
 * The backlog is spread over every pruned table the way the load leaves it (audit entries,
 * used tokens, finished deliveries with an attempt each, failed-login counters, sessions) and
 * written straight into the database before either phase, while this script holds the
 * pruner's advisory locks (so the service's passes, every second with PRUNE_INTERVAL=1s, leave
 * every kind of row to "another instance"), then vacuumed and checkpointed. Both phases thus
 * run on the same tables; the second starts once the locks are released and the service's
 * metrics show its pass under way. Latencies are taken to 0.01 ms from each answer (autocannon's
 * own histogram keeps whole milliseconds: 9 against 11 ms would read as 22%); an answer other
 * than 2xx fails the run.
 *
 * BENCH_PRUNE_ROWS (rows of backlog), BENCH_SECONDS (token issue runs twice that long and
 * feeds both phases), BENCH_CONNECTIONS. DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)
 * names the server; the benchmark creates and drops its own database there.
 */
import autocannon from 'autocannon';
import pg from 'pg';
import { pruneLockOf } from '../src/retention/pruner.ts';
import { PRUNED_TABLES } from '../src/retention/queries.ts';
import {
  benchDatabase, benchServiceEnv, createBenchClient, DEFAULT_ADMIN_URL, loadUntilLastAnswer, postJson, quantile, SERVICE_ROOT, serviceEntry, settleDatabase,
  startProcess, stopProcess, writeUsedTokens,
} from './support.ts';
import { freePort } from '../test/helpers/http.ts';

const ROWS = Number(process.env.BENCH_PRUNE_ROWS ?? 1_000_000);
const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const adminUrl = process.env.DATABASE_URL ?? DEFAULT_ADMIN_URL;
/** Rows per INSERT while the backlog is written. */
const CHUNK = 50_000;

interface Figures {
  phase: string;
  requests: number;
  'req/s': number;
  p50_ms: number;
  p99_ms: number;
  non2xx: number;
}

/** Shares of the backlog per table (deliveries come with one attempt each: twice the rows). */
const SHARES = { audit_log: 0.4, sso_tokens: 0.2, webhook_deliveries: 0.15, login_attempts: 0.05, sessions: 0.05 };

/** Writes `rows` rows past the default retentions, in chunks; returns how many per table. */
async function writeBacklog(db: pg.Client, rows: number, userId: number, clientId: string): Promise<Record<string, number>> {
  const n = Object.fromEntries(Object.entries(SHARES).map(([t, share]) => [t, Math.round(rows * share)])) as Record<keyof typeof SHARES, number>;
  const hook = await db.query<{ id: number }>(
    "INSERT INTO webhooks (url, events, secret, active) VALUES ('http://127.0.0.1:9/none', '{user.2fa_enabled}', 'backlog', false) RETURNING id");
  const chunks = async (total: number, insert: (from: number, to: number) => Promise<unknown>) => {
    for (let from = 1; from <= total; from += CHUNK) await insert(from, Math.min(total, from + CHUNK - 1));
  };
  await chunks(n.audit_log, (a, b) => db.query(
    `INSERT INTO audit_log (at, action, outcome, details) SELECT now() - interval '400 days' - g * interval '1 second', 'token.validate', 'success',
       jsonb_build_object('jti', gen_random_uuid()::text) FROM generate_series($1::int, $2::int) g`, [a, b]));
  await chunks(n.sso_tokens, (a, b) => writeUsedTokens(db, a, b, userId, clientId));
  await chunks(n.webhook_deliveries, (a, b) => db.query(
    `WITH d AS (
       INSERT INTO webhook_deliveries (id, webhook_id, event, data, status, attempts, created_at, completed_at)
       SELECT gen_random_uuid(), $3, 'user.login', '{"user_id": 1}', 'succeeded', 1, t, t FROM generate_series($1::int, $2::int) g,
         LATERAL (SELECT now() - interval '40 days' - g * interval '1 second' AS t) x
       RETURNING id, completed_at)
     INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, duration_ms) SELECT id, 1, completed_at, 200, 12 FROM d`,
    [a, b, hook.rows[0].id]));
  await chunks(n.login_attempts, (a, b) => db.query(
    `INSERT INTO login_attempts (login, failed_count, updated_at) SELECT 'backlog-' || g, 1, now() - interval '2 hours' - g * interval '1 second'
     FROM generate_series($1::int, $2::int) g`, [a, b]));
  await chunks(n.sessions, (a, b) => db.query(
    `INSERT INTO sessions (sid, sess, expire) SELECT 'backlog-' || g, '{"cookie": {}}', now() - g * interval '1 second' FROM generate_series($1::int, $2::int) g`, [a, b]));
  await db.query('ANALYZE');
  return { ...n, webhook_attempts: n.webhook_deliveries };
}

/** Validates `tokens` under autocannon load, each once; latencies of the 2xx answers, to 0.01 ms. */
async function validate(phase: string, url: string, creds: object, tokens: string[]): Promise<Figures> {
  let next = 0;
  const latencies: number[] = [];
  const { result: r, seconds } = await loadUntilLastAnswer({
    url, method: 'POST', connections: CONNECTIONS, amount: tokens.length, headers: { 'content-type': 'application/json' },
    requests: [{ setupRequest: (req: any) => ({ ...req, body: JSON.stringify({ ...creds, token: tokens[next++] }) }) }],
  }, undefined, (status, ms) => {
    if (status >= 200 && status < 300) latencies.push(ms);
  });
  if (r.non2xx > 0 || latencies.length === 0) throw new Error(`${phase}: ${r.non2xx} answers were not 2xx, ${latencies.length} were`);
  latencies.sort((a, b) => a - b);
  const at = (q: number) => Math.round(quantile(latencies, q) * 100) / 100;
  return { phase, requests: r.requests.total, 'req/s': Math.round(r.requests.total / seconds), p50_ms: at(0.5), p99_ms: at(0.99), non2xx: r.non2xx };
}

/** Rows the service has pruned so far, from its metrics listener at `metricsBase` (METRICS_PORT). */
async function prunedSoFar(metricsBase: string): Promise<number> {
  const text = await (await fetch(`${metricsBase}/metrics`)).text();
  return [...text.matchAll(/^auth_pruned_rows_total\{[^}]*\} (\S+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
}

async function main() {
  const database = await benchDatabase(adminUrl, 'auth_bench_prune');
  const sql = new pg.Client({ connectionString: database.url });
  let service: Awaited<ReturnType<typeof startProcess>> | undefined;
  try {
    const metricsPort = await freePort();
    service = await startProcess(serviceEntry(), benchServiceEnv(database.url, { PRUNE_INTERVAL: '1s', METRICS_PORT: String(metricsPort) }), '/readyz', SERVICE_ROOT);
    const base = `http://127.0.0.1:${service.port}`;
    const metricsBase = `http://127.0.0.1:${metricsPort}`;
    const { creds, userId } = createBenchClient(database.url);
    await sql.connect();

    // Tokens for both phases, issued before either (so both validate the same kind of token).
    const tokens: string[] = [];
    await autocannon({
      url: `${base}/api/sso/token`, method: 'POST', connections: CONNECTIONS, duration: DURATION * 2,
      headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...creds, username: 'bench' }),
      requests: [{ onResponse: (status: number, body: string) => void (status === 200 && tokens.push(JSON.parse(body).token)) }],
    } as autocannon.Options);
    const sample = await postJson(`${base}/api/sso/validate`, { ...creds, token: tokens.pop() });
    if (sample.valid !== true) throw new Error(`validation failed: ${JSON.stringify(sample)}`);
    const half = Math.floor(tokens.length / 2);

    // The backlog, written and settled while this session holds every kind's pruning lock: the
    // service's passes leave it alone until the locks go.
    const locks = [...new Map(PRUNED_TABLES.map((t) => [pruneLockOf(t).join(), pruneLockOf(t)])).values()];
    for (const [lockClass, kind] of locks) await sql.query('SELECT pg_advisory_lock($1::int, $2::int)', [lockClass, kind]);
    const before = await prunedSoFar(metricsBase);
    const written = await writeBacklog(sql, ROWS, userId, creds.client_id);
    const total = Object.values(written).reduce((a, b) => a + b, 0);
    await settleDatabase(database.url);
    const quiet = await validate('without pruning', `${base}/api/sso/validate`, creds, tokens.slice(0, half));
    if ((await prunedSoFar(metricsBase)) !== before) throw new Error('the service pruned while the locks were held');

    await sql.query('SELECT pg_advisory_unlock_all()');
    const deadline = Date.now() + 30_000;
    while ((await prunedSoFar(metricsBase)) === before) {
      if (Date.now() > deadline) throw new Error('the service did not start pruning the backlog within 30 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    const atStart = await prunedSoFar(metricsBase);
    const busy = await validate(`with ${total.toLocaleString('en')} rows to prune`, `${base}/api/sso/validate`, creds, tokens.slice(half));
    const duringPhase = (await prunedSoFar(metricsBase)) - atStart;

    console.log(`backlog written: ${JSON.stringify(written)} (${total.toLocaleString('en')} rows)`);
    console.table([quiet, busy]);
    const ratio = busy.p99_ms / quiet.p99_ms;
    console.log(`validation p99 without pruning ${quiet.p99_ms} ms, while pruning ${busy.p99_ms} ms: ${((ratio - 1) * 100).toFixed(1)}% `
      + `(target within 20%); ${duringPhase.toLocaleString('en')} rows pruned during the measurement, ${CONNECTIONS} connections`);
    if (duringPhase === 0) console.log('note: the pass had finished before the measurement: raise BENCH_PRUNE_ROWS');
  } finally {
    if (service) await stopProcess(service.child);
    await sql.end().catch(() => {});
    await database.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
