/**
 * npm run bench:scale: the same operations on a small PostgreSQL database (10⁴ rows) and on a large one,
 * measured in the same run, with each operation's req/s and p99 at both sizes and their ratio.
 *
 * Each size gets a fresh database (bench_scale_<random>, dropped after), migrated and given the
 * bench client and user `bench` (an admin; bcrypt cost 4, lowered for the run) by the admin
 * command line. The large one then gets SCALE_USERS users (default 1,000,000) and SCALE_ROWS
 * (default 10,000,000) sso_tokens rows and as many audit_log rows, the small one the same data
 * set at SCALE_SMALL_USERS and SCALE_SMALL_ROWS (default 10,000 each), written with INSERT ...
 * SELECT generate_series (one bcrypt hash, computed once, for every user), then VACUUM (ANALYZE)
 * and CHECKPOINT (bench/support.ts settleDatabase), as autovacuum keeps a database in use: both
 * sides' audit filters fill a page (an empty log's filtered page has no row to send, and a
 * side that sends none is not the same operation). The service
 * (dist/server.js, built first) serves both databases at once (two processes), and autocannon drives every
 * operation, on the small side then on the large one, for SCALE_SECONDS (default 10) at SCALE_CONNECTIONS (default 20; sign-in at 4):
 * token issue, validation (of the tokens issued), sign-in, the admin user search
 * (GET /api/admin/users?q=), the audit API's first page and a filtered page; then, one request
 * at a time, the audit export's first byte (NDJSON, whole and filtered: SCALE_EXPORTS requests, default 20,
 * SCALE_EXPORT_PAUSE_MS apart, default 250; its req/s is 1000 / the median ms), and one pruning pass (src/retention/pruner.ts prunePass, run here)
 * over a backlog of SCALE_PRUNE_ROWS (default 20,000) audit entries and as many used tokens past
 * retention, written just before (its req/s is rows deleted per second, its p50 and p99 the pass's time).
 * Every ratio is large / small: below 1 is slower on the large database.
 * Quick setting: SCALE_USERS=100000 SCALE_ROWS=1000000. SCALE_ONLY (a regular expression) runs
 * only the operations whose name matches, e.g. SCALE_ONLY=export.
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) names the server.
 */
import http from 'node:http';
import bcrypt from 'bcrypt';
import pg from 'pg';
import { openPostgres } from '../src/db/postgres.ts';
import { prunePass } from '../src/retention/pruner.ts';
import {
  adminCli, benchDatabase, benchServiceEnv, checkpoint, DEFAULT_ADMIN_URL, loadUntilLastAnswer, postJson, quantile, serviceEntry, settleDatabase, startProcess, stopProcess, uuidv7At, writeUsedTokens,
} from './support.ts';

const USERS = Number(process.env.SCALE_USERS ?? 1_000_000);
const ROWS = Number(process.env.SCALE_ROWS ?? 10_000_000);
const SMALL_USERS = Number(process.env.SCALE_SMALL_USERS ?? 10_000);
const SMALL_ROWS = Number(process.env.SCALE_SMALL_ROWS ?? 10_000);
const SECONDS = Number(process.env.SCALE_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.SCALE_CONNECTIONS ?? 20);
const adminUrl = process.env.DATABASE_URL ?? DEFAULT_ADMIN_URL;
const EXPORTS = Number(process.env.SCALE_EXPORTS ?? 20);
/**
 * How long to wait after an export is dropped before the next one starts (ms; 0: none), so that
 * each first byte is timed alone: the service goes on to read the dropped export's second batch
 * (200 rows) before it sees its receiver gone, and back to back that read ran beside the next
 * export's first (docs/performance.md, "Cost as data grows").
 */
const EXPORT_PAUSE_MS = Number(process.env.SCALE_EXPORT_PAUSE_MS ?? 250);
/** Only the operations whose name matches (a regular expression; validation needs token issue). */
const ONLY = process.env.SCALE_ONLY ? new RegExp(process.env.SCALE_ONLY) : null;
const PRUNE_ROWS = Number(process.env.SCALE_PRUNE_ROWS ?? 20_000);
const PASSWORD = 'quiet harbor lantern 42';

interface Op { 'req/s': number; p50_ms: number; p99_ms: number; non2xx: number }
type Results = Map<string, Op>;

/** Writes a data set into `url`: `users` users, `rows` tokens and as many audit rows; then ANALYZE. */
async function fill(url: string, clientId: string, { users: USERS, rows: ROWS }: { users: number; rows: number }): Promise<void> {
  const sql = new pg.Client({ connectionString: url });
  await sql.connect();
  try {
    const hash = await bcrypt.hash(PASSWORD, 4);
    let t = performance.now();
    await sql.query(
      `INSERT INTO users (username, email, full_name, password_hash)
       SELECT 'user' || g, 'user' || g || '@example.com', 'Person Number ' || g, $1 FROM generate_series(1, $2::int) g`,
      [hash, USERS],
    );
    console.log(`  ${USERS} users in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    t = performance.now();
    const { rows: [{ min, max }] } = await sql.query<{ min: number; max: number }>('SELECT min(id) AS min, max(id) AS max FROM users');
    await sql.query(
      // in the order of issue over the last 20 hours, as the service writes them: none passes the
      // token retention (a day after its expiry) during a run, so the pruning pass deletes the
      // same backlog on both sides. (Written as a rolling day, g % 86400 seconds old, about 115 of
      // the large side's passed retention each second, scattered over the table: its pass deleted
      // 87,600 rows against 40,000 and ran at 0.80; in issue order, 1.03.)
      // An unused token past its expiry has had its token.expired (expiry_notified_at), as the
      // service's sweep leaves it: otherwise the large side's sweep works through them during the run
      `INSERT INTO sso_tokens (jti, user_id, client_id, username, ip_address, issued_at, expires_at, used_at, expiry_notified_at)
       SELECT ${uuidv7At('issued')}, $3::int + g % ($4::int - $3::int + 1), $1, 'user' || g, '10.0.0.1',
              issued, issued + interval '5 minutes',
              CASE WHEN g % 10 <> 0 THEN issued END,
              CASE WHEN g % 10 = 0 AND issued + interval '5 minutes' <= now() THEN issued + interval '5 minutes' END
       FROM generate_series(1, $2::int) g, LATERAL (SELECT now() - ($2::int - g) * (interval '20 hours' / $2::int) AS issued) x`,
      [clientId, ROWS, min, max],
    );
    console.log(`  ${ROWS} sso_tokens rows in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    t = performance.now();
    await sql.query(
      `INSERT INTO audit_log (at, action, outcome, user_id, username, client_id, ip_address, user_agent, details)
       SELECT now() - (g % (86400 * 30)) * interval '1 second',
              (ARRAY['user.login', 'sso.token_issued', 'sso.token_validated', 'user.logout'])[1 + g % 4],
              CASE WHEN g % 20 = 0 THEN 'failure' ELSE 'success' END,
              $3::int + g % ($4::int - $3::int + 1), 'user' || g, $1, '10.0.0.1', 'bench', '{}'
       FROM generate_series(1, $2::int) g`,
      [clientId, ROWS, min, max],
    );
    console.log(`  ${ROWS} audit_log rows in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  } finally {
    await sql.end();
  }
  // Vacuumed, as autovacuum keeps a database that has run for a while: left to autovacuum, the
  // large side's first vacuum of 10⁷ fresh rows (hint bits, the visibility map) runs for minutes
  // beside the operations measured, and the first reads of each fresh page write it back.
  const t = performance.now();
  const { checkpointed } = await settleDatabase(url);
  console.log(`  vacuumed${checkpointed ? ' and checkpointed' : ' (CHECKPOINT refused: the role is neither superuser nor pg_checkpoint)'} in ${((performance.now() - t) / 1000).toFixed(1)} s`);
}

/** Runs one operation for SECONDS and returns its req/s and p99 (unrounded latencies). */
async function op(options: Parameters<typeof loadUntilLastAnswer>[0], onBody?: (status: number, body: string) => void): Promise<Op> {
  const latencies: number[] = [];
  const { result, seconds } = await loadUntilLastAnswer(options, onBody, (_s, ms) => latencies.push(ms));
  latencies.sort((a, b) => a - b);
  return {
    'req/s': Math.round(result.requests.total / seconds), p50_ms: Math.round(quantile(latencies, 0.5) * 10) / 10,
    p99_ms: Math.round(quantile(latencies, 0.99) * 10) / 10, non2xx: result.non2xx,
  };
}

/** Milliseconds from the request to the first byte of the body of a GET; the response is then dropped. */
function firstByte(url: string, bearer: string): Promise<{ ms: number; status: number; first: string }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = http.get(url, { headers: { authorization: `Bearer ${bearer}` } }, (res) => {
      res.once('data', (chunk: Buffer) => {
        const ms = performance.now() - started;
        res.once('close', () => resolve({ ms, status: res.statusCode ?? 0, first: chunk.toString('utf8', 0, 300) }));
        req.destroy();
      });
      res.once('end', () => resolve({ ms: performance.now() - started, status: res.statusCode ?? 0, first: '' }));
    });
    req.once('error', (err) => (req.destroyed ? undefined : reject(err)));
  });
}

/** EXPORTS exports one after another, each dropped at its first byte: req/s is 1000 / the median. */
async function exportFirstByte(side: Side, query: string): Promise<Op> {
  const ms: number[] = [];
  let non2xx = 0;
  while (ms.length < EXPORTS) {
    const r = await firstByte(`${side.base}/api/admin/audit?${query}`, side.bearer);
    // a dropped export ends on the service a moment later: MAX_EXPORTS (2) may still be running
    if (r.status === 429) { await new Promise((done) => setTimeout(done, 20)); continue; }
    if (r.status < 200 || r.status > 299) {
      if (non2xx === 0) console.log(`note: export ${query} on ${side.base}: ${r.status} ${r.first}`);
      non2xx++;
    }
    ms.push(r.ms);
    if (EXPORT_PAUSE_MS > 0) await new Promise((done) => setTimeout(done, EXPORT_PAUSE_MS));
  }
  ms.sort((a, b) => a - b);
  const p50 = quantile(ms, 0.5);
  return { 'req/s': Math.round(1000 / p50), p50_ms: Math.round(p50 * 10) / 10, p99_ms: Math.round(quantile(ms, 0.99) * 10) / 10, non2xx };
}

/**
 * PRUNE_ROWS audit entries older than AUDIT_RETENTION and as many used tokens past
 * TOKEN_RETENTION, then one pass (the defaults' retentions) timed: req/s is rows deleted per second.
 */
async function prune(side: Side): Promise<Op> {
  const sql = new pg.Client({ connectionString: side.url });
  await sql.connect();
  try {
    await sql.query(
      `INSERT INTO audit_log (at, action, outcome, details) SELECT now() - interval '400 days' - g * interval '1 second', 'token.validate', 'success', '{}'
       FROM generate_series(1, $1::int) g`, [PRUNE_ROWS]);
    await writeUsedTokens(sql, 1, PRUNE_ROWS, 1, side.creds.client_id);
    await sql.query('VACUUM ANALYZE audit_log, sso_tokens');
    // both sides' passes start after a checkpoint: each page a pass changes first is then written whole to the WAL on either side
    if (!(await checkpoint(sql))) console.log('  prune: CHECKPOINT refused (the role is neither superuser nor pg_checkpoint)');
  } finally {
    await sql.end();
  }
  const db = openPostgres(side.url, { max: 2 });
  try {
    const started = performance.now();
    const report = await prunePass(db, { TOKEN_RETENTION: 86_400_000, WEBHOOK_RETENTION: 30 * 86_400_000, AUDIT_RETENTION: 365 * 86_400_000, LOCKOUT_MINUTES: 30 });
    const ms = performance.now() - started;
    const deleted = Object.values(report.counts).reduce((a, b) => a + b, 0);
    if (report.leftToOthers.length > 0) console.log(`  prune: left to the service's own pass: ${report.leftToOthers.join(', ')}`);
    return { 'req/s': Math.round(deleted / (ms / 1000)), p50_ms: Math.round(ms), p99_ms: Math.round(ms), non2xx: deleted === 2 * PRUNE_ROWS ? 0 : 1 };
  } finally {
    await db.close();
  }
}

interface Side { url: string; base: string; bearer: string; creds: { client_id: string; client_secret: string }; stop(): Promise<void> }

/** An access token of the admin `bench` (it lasts ACCESS_TOKEN_TTL_SECONDS, 15 minutes by default). */
async function adminBearer(base: string): Promise<string> {
  const bearer = (await postJson(`${base}/api/login`, { username: 'bench', password: PASSWORD })).token;
  if (!bearer) throw new Error('no admin access token from POST /api/login');
  return bearer;
}

/** A fresh database filled with `size`, the bench client and admin, and the service on it. */
async function prepare(label: string, size: { users: number; rows: number }, entry: string): Promise<Side> {
  const db = await benchDatabase(adminUrl, 'bench_scale');
  const client = adminCli(db.url, ['client', 'create', '--name', 'Bench', '--callback-url', 'https://bench.example/cb', '--allow-ip', '127.0.0.1']);
  adminCli(db.url, ['user', 'create', '--username', 'bench', '--email', 'bench@example.com', '--password', PASSWORD]);
  const sql = new pg.Client({ connectionString: db.url });
  await sql.connect();
  await sql.query("UPDATE users SET role = 'admin' WHERE username = 'bench'");
  await sql.end();
  console.log(`${label}: writing the data set`);
  await fill(db.url, client.client_id, size);
  const { child, port } = await startProcess(entry, benchServiceEnv(db.url), '/readyz');
  const base = `http://127.0.0.1:${port}`;
  return {
    url: db.url, base, bearer: await adminBearer(base), creds: { client_id: client.client_id, client_secret: client.client_secret },
    async stop() {
      await stopProcess(child);
      await db.drop();
    },
  };
}

/** The operations, in order, each run on one side; validation validates the tokens that side's issue gave. */
function operations(tokensOf: Map<Side, string[]>): [string, (side: Side) => Promise<Op>][] {
  const json = { method: 'POST' as const, headers: { 'content-type': 'application/json' } };
  const auth = (side: Side) => ({ headers: { authorization: `Bearer ${side.bearer}` } });
  const get = (path: string) => (side: Side) => op({ ...auth(side), url: `${side.base}${path}`, connections: CONNECTIONS, duration: SECONDS });
  return [
    ['POST /api/sso/token', (side) => {
      const tokens: string[] = [];
      tokensOf.set(side, tokens);
      return op({ ...json, url: `${side.base}/api/sso/token`, connections: CONNECTIONS, duration: SECONDS, body: JSON.stringify({ ...side.creds, username: 'bench' }) },
        (status, body) => { if (status === 200) tokens.push(JSON.parse(body).token); });
    }],
    ['POST /api/sso/validate', (side) => {
      const tokens = tokensOf.get(side) ?? [];
      let next = 0;
      return op({
        ...json, url: `${side.base}/api/sso/validate`, connections: CONNECTIONS, amount: tokens.length,
        requests: [{ setupRequest: (req: any) => ({ ...req, body: JSON.stringify({ ...side.creds, token: tokens[next++] }) }) }],
      });
    }],
    ['POST /api/auth/login (cost 4)', (side) => op({ ...json, url: `${side.base}/api/auth/login`, connections: 4, duration: SECONDS, body: JSON.stringify({ login: 'bench', password: PASSWORD }) })],
    ['GET /api/admin/users?q=user1234@ (one match)', get('/api/admin/users?q=user1234%40&limit=50')],
    ['GET /api/admin/users?q=zzz (no match)', get('/api/admin/users?q=zzz&limit=50')],
    ['GET /api/admin/audit?limit=50', get('/api/admin/audit?limit=50')],
    ['GET /api/admin/audit?action=user.login&outcome=failure', get('/api/admin/audit?action=user.login&outcome=failure&limit=50')],
    ['audit export first byte (format=ndjson; 1000/median)', (side) => exportFirstByte(side, 'format=ndjson')],
    ['audit export first byte (ndjson, user.login failure)', (side) => exportFirstByte(side, 'format=ndjson&action=user.login&outcome=failure')],
    [`prune pass, ${2 * PRUNE_ROWS} rows (rows/s; p50 = pass ms)`, prune],
  ];
}

async function main(): Promise<void> {
  const entry = serviceEntry();
  const small = { users: SMALL_USERS, rows: SMALL_ROWS };
  const smallSide = await prepare(`${SMALL_USERS} users, ${SMALL_ROWS} tokens and audit rows`, small, entry);
  const largeSide = await prepare(`${USERS} users, ${ROWS} tokens and audit rows`, { users: USERS, rows: ROWS }, entry);
  const smallResults: Results = new Map();
  const large: Results = new Map();
  try {
    // both services stay up; each operation runs on the small side, then at once on the large one
    for (const [name, run] of operations(new Map()).filter(([name]) => !ONLY || ONLY.test(name))) {
      // a new admin token before each operation: the small side's, taken before the large side
      // was filled (12 minutes at full size on a slow machine), had expired by its exports (401)
      for (const side of [smallSide, largeSide]) side.bearer = await adminBearer(side.base);
      smallResults.set(name, await run(smallSide));
      large.set(name, await run(largeSide));
    }
  } finally {
    await smallSide.stop();
    await largeSide.stop();
  }
  const rows = [...smallResults.keys()].map((name) => {
    const a = smallResults.get(name)!;
    const b = large.get(name)!;
    return {
      operation: name, 'small req/s': a['req/s'], 'small p50 ms': a.p50_ms, 'small p99 ms': a.p99_ms,
      'large req/s': b['req/s'], 'large p50 ms': b.p50_ms, 'large p99 ms': b.p99_ms,
      ratio: Math.round((b['req/s'] / a['req/s']) * 100) / 100, non2xx: a.non2xx + b.non2xx,
    };
  });
  console.log(`\nsmall: ${SMALL_USERS} users, ${SMALL_ROWS} sso_tokens and audit_log rows; large: ${USERS} users, ${ROWS} sso_tokens and ${ROWS} audit_log rows; ${SECONDS} s per operation at ${CONNECTIONS} connections (sign-in 4)`);
  console.table(rows);
  console.log('goal: every ratio (large req/s / small req/s) ≥ 0.9');
}

await main();
