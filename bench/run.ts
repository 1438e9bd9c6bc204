/**
 * npm run bench: token issue and validation on the real PostgreSQL, against a bare Express
 * JSON handler as the ceiling, with autocannon (50 connections). Prints req/s and latency
 * percentiles per endpoint, and the validation/ceiling ratio. Ceiling and validation run in
 * alternating rounds (BENCH_ROUNDS, default 2) so both see the same machine.
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) names the server; the
 * benchmark creates and drops its own database there.
 */
import type { ChildProcess } from 'node:child_process';
import autocannon from 'autocannon';
import { adminCli, benchDatabase, benchServiceEnv, DEFAULT_ADMIN_URL, postJson as post, startProcess as start, stopProcess } from './support.ts';

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
/** Ceiling and validation run alternately this many times: the machine's speed drifts. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const adminUrl = process.env.DATABASE_URL ?? DEFAULT_ADMIN_URL;

interface Figures {
  endpoint: string;
  'req/s': number;
  p50_ms: number;
  p99_ms: number;
  non2xx: number;
  errors: number;
  requests: number;
}

/**
 * Runs autocannon and reports req/s as answers / (last answer - start). autocannon's own
 * `requests.average` is a mean of whole one-second samples, and a run given an `amount` ends
 * only at its next one-second tick: 40,000 answers in 15.2 s counted as 40,000 / 16.
 */
async function measure(endpoint: string, options: autocannon.Options, onBody?: (status: number, body: string) => void): Promise<Figures> {
  let last = 0;
  const started = performance.now();
  const base = (options.requests as autocannon.Request[] | undefined)?.[0] ?? {};
  const r = await autocannon({
    ...options,
    requests: [{
      ...base,
      onResponse: (status: number, body: string) => {
        last = performance.now();
        onBody?.(status, body);
      },
    }],
  } as autocannon.Options);
  return {
    endpoint,
    'req/s': Math.round(r.requests.total / ((last - started) / 1000)),
    p50_ms: r.latency.p50,
    p99_ms: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors,
    requests: r.requests.total,
  };
}

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;

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
    const json = { method: 'POST' as const, headers: { 'content-type': 'application/json' } };

    // 1. Token issue; the tokens it returns feed the validation rounds.
    const tokens: string[] = [];
    const issue = await measure('POST /api/sso/token', {
      // twice as long as a round of the others: issue is the slower endpoint and must leave enough tokens
      ...json, url: `${base}/api/sso/token`, connections: CONNECTIONS, duration: DURATION * 2,
      body: JSON.stringify({ ...creds, username: 'bench' }),
    }, (status, body) => {
      if (status === 200) tokens.push(JSON.parse(body).token);
    });
    const spare = tokens.pop()!; // validated once below as a check
    const sample = await post(`${base}/api/sso/validate`, { ...creds, token: spare });
    if (sample.valid !== true) throw new Error(`validation failed: ${JSON.stringify(sample)}`);

    // 2. Rounds of ceiling then validation (each token validated exactly once).
    const perRound = Math.floor(tokens.length / ROUNDS);
    let next = 0;
    const ceilings: Figures[] = [];
    const validations: Figures[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      ceilings.push(await measure(`bare Express JSON (ceiling) #${round}`, {
        ...json, url: `http://127.0.0.1:${ceiling.port}/echo`, connections: CONNECTIONS, duration: DURATION,
        body: JSON.stringify({ ...creds, token: probe.token }),
      }));
      validations.push(await measure(`POST /api/sso/validate #${round}`, {
        ...json, url: `${base}/api/sso/validate`, connections: CONNECTIONS, amount: perRound,
        requests: [{ setupRequest: (req: any) => ({ ...req, body: JSON.stringify({ ...creds, token: tokens[next++] }) }) }],
      }));
    }

    console.table([issue, ...ceilings.flatMap((c, i) => [c, validations[i]])]);
    const ratio = mean(validations.map((v) => v['req/s'])) / mean(ceilings.map((c) => c['req/s']));
    console.log(`validation / ceiling: ${(ratio * 100).toFixed(1)}% (target >= 60%; rounds ${validations.map((v, i) => `${((v['req/s'] / ceilings[i]['req/s']) * 100).toFixed(0)}%`).join(', ')}), `
      + `validation p99 ${validations.map((v) => v.p99_ms).join(' / ')} ms (target < 20 ms; ceiling's own p99 ${ceilings.map((c) => c.p99_ms).join(' / ')} ms), ${CONNECTIONS} connections`);
    const wrongAnswers = validations.reduce((n, v) => n + v.non2xx, 0);
    if (wrongAnswers > 0) console.log(`note: ${wrongAnswers} validation answers were not 2xx`);
  } finally {
    await Promise.all(children.map(stopProcess));
    await db.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
