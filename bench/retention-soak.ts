/**
 * npm run soak:retention: a mixed load for SOAK_SECONDS (default 300) against the service on
 * the real PostgreSQL with short retentions, printing the row count of every pruned table
 * every SOAK_SAMPLE_SECONDS (default 20). With pruning the counts level off once the oldest
 * rows reach their retention; without it they grow for as long as the load runs.
 *
 * The load, SOAK_RATE (default 50) operations per second: token issued and validated (40%),
 * token issued and left to expire (20%: token.expired events), failed login of an unknown
 * name (20%: failed-login counters), session sign-in (20%: sessions); a webhook subscribed
 * to every event answers 200, or 500 one time in ten (retries, some deliveries failed).
 *
 * Retentions default to TOKEN_RETENTION=30s, WEBHOOK_RETENTION=30s, AUDIT_RETENTION=1m,
 * PRUNE_INTERVAL=10s, LOCKOUT_MINUTES=1, SESSION_TTL_SECONDS=60, TOKEN_TTL_SECONDS=5; set any
 * of them to change it. DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)
 * names the server; the soak creates and drops its own database there.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { adminCli, benchDatabase, benchServiceEnv, DEFAULT_ADMIN_URL, startProcess, stopProcess } from './support.ts';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 300);
const SAMPLE_SECONDS = Number(process.env.SOAK_SAMPLE_SECONDS ?? 20);
const RATE = Number(process.env.SOAK_RATE ?? 50);
const adminUrl = process.env.DATABASE_URL ?? DEFAULT_ADMIN_URL;
const TABLES = ['sso_tokens', 'webhook_deliveries', 'webhook_attempts', 'audit_log', 'login_attempts', 'sessions'] as const;

const setting = (key: string, fallback: string) => process.env[key] || fallback;
const RETENTIONS = {
  TOKEN_RETENTION: setting('TOKEN_RETENTION', '30s'),
  WEBHOOK_RETENTION: setting('WEBHOOK_RETENTION', '30s'),
  AUDIT_RETENTION: setting('AUDIT_RETENTION', '1m'),
  PRUNE_INTERVAL: setting('PRUNE_INTERVAL', '10s'),
  LOCKOUT_MINUTES: setting('LOCKOUT_MINUTES', '1'),
  SESSION_TTL_SECONDS: setting('SESSION_TTL_SECONDS', '60'),
  TOKEN_TTL_SECONDS: setting('TOKEN_TTL_SECONDS', '5'),
};

/** A webhook receiver that fails one request in ten. */
async function startReceiver(): Promise<{ url: string; close(): void }> {
  let n = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(++n % 10 === 0 ? 500 : 200).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, close: () => server.close() };
}

async function post(url: string, body: unknown): Promise<{ status: number; json: any }> {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, json: await r.json().catch(() => null) };
}

async function counts(sql: pg.Client): Promise<Record<string, number>> {
  const r = await sql.query(`SELECT ${TABLES.map((t) => `(SELECT count(*) FROM ${t})::int AS ${t}`).join(', ')}`);
  return r.rows[0];
}

async function main() {
  const database = await benchDatabase(adminUrl, 'auth_soak');
  const sql = new pg.Client({ connectionString: database.url });
  const receiver = await startReceiver();
  let service: Awaited<ReturnType<typeof startProcess>> | undefined;
  try {
    service = await startProcess('src/server.ts', benchServiceEnv(database.url, {
      ...RETENTIONS, BCRYPT_COST: '4', TOKEN_SWEEP_INTERVAL_MS: '1000', WEBHOOK_BACKOFF_MS: '500', WEBHOOK_TIMEOUT_MS: '2000',
    }), '/readyz');
    const base = `http://127.0.0.1:${service.port}`;
    const client = adminCli(database.url, ['client', 'create', '--name', 'Soak', '--callback-url', 'https://soak.example/cb', '--allow-ip', '127.0.0.1']);
    adminCli(database.url, ['user', 'create', '--username', 'soak', '--email', 'soak@example.com', '--password', 'quiet harbor lantern 42']);
    await sql.connect();
    await sql.query(
      `INSERT INTO webhooks (url, events, secret) VALUES ($1, ARRAY['user.login', 'user.logout', 'user.login_failed', 'user.locked',
       'user.2fa_enabled', 'token.expired', 'client.registered'], 'soak-secret')`, [receiver.url]);
    const creds = { client_id: client.client_id, client_secret: client.client_secret };

    let operations = 0;
    let failures = 0;
    const operation = async (i: number) => {
      const kind = i % 5;
      if (kind <= 2) {
        const issued = await post(`${base}/api/sso/token`, { ...creds, username: 'soak' });
        if (issued.status !== 200) throw new Error(`issue ${issued.status}`);
        if (kind <= 1) {
          const v = await post(`${base}/api/sso/validate`, { ...creds, token: issued.json.token });
          if (v.status !== 200) throw new Error(`validate ${v.status}`);
        }
      } else if (kind === 3) {
        await post(`${base}/api/login`, { username: `nobody-${i}`, password: 'wrong password' }); // 401 expected
      } else {
        const s = await post(`${base}/api/auth/login`, { login: 'soak', password: 'soak password 1' });
        if (s.status !== 200) throw new Error(`session login ${s.status}`);
      }
    };

    const started = Date.now();
    const rows: Array<Record<string, number | string>> = [];
    const sample = async () => {
      const c = await counts(sql);
      const row = { t_s: Math.round((Date.now() - started) / 1000), ops: operations, ...c };
      rows.push(row);
      console.log(Object.entries(row).map(([k, v]) => `${k}=${v}`).join('  '));
    };
    console.log(`soak: ${SECONDS} s at ${RATE} operations/s, ${JSON.stringify(RETENTIONS)}`);
    await sample();
    const sampler = setInterval(() => void sample(), SAMPLE_SECONDS * 1000);
    const inFlight = new Set<Promise<void>>();
    for (let i = 0; Date.now() - started < SECONDS * 1000; i++) {
      const due = started + (i * 1000) / RATE;
      if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now()));
      if (inFlight.size >= 200) await Promise.race(inFlight); // a slow service is not buried under requests
      const p: Promise<void> = operation(i).then(() => void operations++, () => void failures++).finally(() => inFlight.delete(p));
      inFlight.add(p);
    }
    await Promise.all(inFlight);
    clearInterval(sampler);
    await sample();

    // Level or growing: the last sample against the one at half time (the retentions above
    // are reached well before half of a five-minute soak).
    const mid = rows[Math.floor((rows.length - 1) / 2)];
    const end = rows[rows.length - 1];
    console.log(`\n${operations} operations, ${failures} failed; from t=${mid.t_s}s to t=${end.t_s}s:`);
    for (const t of TABLES) {
      const growth = Number(mid[t]) === 0 ? 0 : (Number(end[t]) - Number(mid[t])) / Number(mid[t]);
      console.log(`  ${t.padEnd(20)} ${String(mid[t]).padStart(8)} -> ${String(end[t]).padStart(8)}  ${(growth * 100).toFixed(0).padStart(5)}%  ${growth <= 0.2 ? 'level' : 'GROWING'}`);
    }
  } finally {
    if (service) await stopProcess(service.child);
    receiver.close();
    await sql.end().catch(() => {});
    await database.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
