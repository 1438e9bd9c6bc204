/**
 * npm run bench: token issue and validation on the real PostgreSQL, against a bare Express
 * JSON handler as the ceiling, with autocannon (50 connections). Prints req/s and latency
 * percentiles per endpoint, and the validation/ceiling ratio.
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) names the server; the
 * benchmark creates and drops its own database there.
 */
import type { ChildProcess } from 'node:child_process';
import autocannon from 'autocannon';
import { adminCli, benchDatabase, benchServiceEnv, DEFAULT_ADMIN_URL, postJson as post, startProcess as start } from './support.ts';

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
const adminUrl = process.env.DATABASE_URL ?? DEFAULT_ADMIN_URL;

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
  const db = await benchDatabase(adminUrl, 'auth_bench');
  const children: ChildProcess[] = [];
  try {
    const service = await start('src/server.ts', benchServiceEnv(db.url), '/readyz');
    children.push(service.child);
    const base = `http://127.0.0.1:${service.port}`;

    // A client and a user, through the admin command line on this database.
    const client = adminCli(db.url, ['client', 'create', '--name', 'Bench', '--callback-url', 'https://bench.example/cb', '--allow-ip', '127.0.0.1']);
    adminCli(db.url, ['user', 'create', '--username', 'bench', '--email', 'bench@example.com', '--password', 'bench password']);
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
    await db.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
