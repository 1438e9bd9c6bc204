/**
 * npm run bench:gc: how much of what the service allocates on its hot routes outlives a
 * young-generation collection, beside the limit (bench/limit.ts) in the same run.
 *
 * A request's objects should die young; when garbage already promoted keeps later objects
 * alive (a list of in-flight responses did: src/http/graceful-close.ts), a large share of every young collection
 * is copied and promoted, and collecting takes a good part of the main thread. Each process
 * runs with V8's --trace-gc-nvp (one line per collection: bytes allocated since the last,
 * promoted, copied within the young generation, pause) on top of the node options `npm start`
 * gives the service; autocannon drives each route at 50 connections (BENCH_CONNECTIONS) for
 * BENCH_SECONDS (default 5), and the lines written meanwhile are added up:
 *
 * - the service (as deployed, dist/): token issue, validation of each token just issued, and
 *   validation refused 401 for a wrong secret (no database, the most requests a second);
 * - the limit: single-use validation with plain node:http and pg.
 *
 * DATABASE_URL names the PostgreSQL server (default postgres://postgres@127.0.0.1:5432/postgres).
 */
import type { ChildProcess } from 'node:child_process';
import type autocannon from 'autocannon';
import {
  benchDatabase, benchServiceEnv, createBenchClient, DEFAULT_ADMIN_URL, loadUntilLastAnswer, postJson, SERVICE_ROOT, serviceEntry, startProcess, stopProcess, writeLimitTokens,
} from './support.ts';

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const GC_FLAGS = ['--trace-gc-nvp'];

/** Sums the collections a process reports on its standard output while `run` runs. */
/**
 * Starts reading a process's trace at once (a pipe nobody reads would stop the process once
 * full) and notes its main thread: the isolate of its first trace line. Lines of worker
 * threads (the webhook dispatcher's) carry another isolate and are left out.
 */
function traced(child: ChildProcess): ChildProcess & { mainIsolate?: string } {
  const t = child as ChildProcess & { mainIsolate?: string };
  const onFirst = (chunk: Buffer) => {
    const isolate = /^\[\d+:0x[0-9a-f]+\]/m.exec(chunk.toString('utf8'))?.[0];
    if (isolate) {
      t.mainIsolate = isolate;
      child.stdout!.off('data', onFirst);
    }
  };
  child.stdout!.on('data', onFirst);
  return t;
}

async function collections(child: ChildProcess & { mainIsolate?: string }, run: () => Promise<{ requests: number; seconds: number; failed: number }>) {
  const totals = { collections: 0, allocated: 0, promoted: 0, copied: 0, pauseMs: 0 };
  let pending = '';
  const onData = (chunk: Buffer) => {
    const lines = (pending + chunk.toString('utf8')).split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) {
      if (!line.includes(' gc=') || (child.mainIsolate && !line.startsWith(child.mainIsolate))) continue;
      const field = (name: string) => Number(new RegExp(`\\b${name}=([0-9.]+)`).exec(line)?.[1] ?? 0);
      totals.collections++;
      totals.allocated += field('allocated');
      totals.promoted += field('promoted');
      totals.copied += field('new_space_survived');
      totals.pauseMs += field('pause');
    }
  };
  child.stdout!.on('data', onData);
  const { requests, seconds, failed } = await run();
  await new Promise((r) => setTimeout(r, 100)); // the last lines
  child.stdout!.off('data', onData);
  const perRequest = (bytes: number) => Math.round(bytes / Math.max(1, requests));
  return {
    'req/s': seconds > 0 ? Math.round(requests / seconds) : 0,
    'not 2xx': failed,
    'allocated B/req': perRequest(totals.allocated),
    'copied B/req': perRequest(totals.copied),
    'promoted B/req': perRequest(totals.promoted),
    'promoted share': `${((100 * totals.promoted) / Math.max(1, totals.allocated)).toFixed(1)}%`,
    'GC pause µs/req': Math.round((totals.pauseMs * 1000) / Math.max(1, requests)),
    collections: totals.collections,
  };
}

/** Drives `url` for DURATION seconds (or `amount` requests): how many were answered, in how long. */
async function drive(url: string, options: Partial<autocannon.Options>, onBody?: (status: number, body: string) => void): Promise<{ requests: number; seconds: number; failed: number }> {
  const { result, seconds } = await loadUntilLastAnswer({
    url, method: 'POST', headers: { 'content-type': 'application/json' }, connections: CONNECTIONS, duration: DURATION, ...options,
  } as autocannon.Options, onBody);
  return { requests: result.requests.total, seconds, failed: result.non2xx + result.errors };
}

async function main() {
  const db = await benchDatabase(process.env.DATABASE_URL ?? DEFAULT_ADMIN_URL, 'auth_bench_gc');
  const children: ChildProcess[] = [];
  try {
    const service = await startProcess(serviceEntry(), benchServiceEnv(db.url), '/readyz', SERVICE_ROOT, { nodeFlags: GC_FLAGS, stdout: 'pipe', onSpawn: traced });
    children.push(service.child);
    const { creds } = createBenchClient(db.url);
    const base = `http://127.0.0.1:${service.port}`;
    const probe = await postJson(`${base}/api/sso/token`, { ...creds, username: 'bench' });
    if (!probe.token) throw new Error(`token issue failed: ${JSON.stringify(probe)}`);

    const rows: Record<string, unknown> = {};
    const tokens: string[] = [];
    rows['service: POST /api/sso/token'] = await collections(service.child, () => drive(`${base}/api/sso/token`, {
      body: JSON.stringify({ ...creds, username: 'bench' }),
    }, (status, body) => {
      if (status === 200) tokens.push(JSON.parse(body).token);
    }));
    let next = 0;
    rows['service: POST /api/sso/validate'] = await collections(service.child, () => drive(`${base}/api/sso/validate`, {
      amount: tokens.length, // each token issued above, validated once
      requests: [{ setupRequest: (req: any) => ({ ...req, body: JSON.stringify({ ...creds, token: tokens[next++] }) }) }],
    } as Partial<autocannon.Options>));
    rows['service: validate, wrong secret (401)'] = await collections(service.child, () => drive(`${base}/api/sso/validate`, {
      body: JSON.stringify({ ...creds, client_secret: 'x'.repeat(40), token: probe.token }),
    }));

    const jtis = await writeLimitTokens(db.url, creds.client_id, 30_000 * DURATION);
    const limit = await startProcess('bench/limit.ts', { DATABASE_URL: db.url }, '/healthz', undefined, { nodeFlags: GC_FLAGS, stdout: 'pipe', onSpawn: traced });
    children.push(limit.child);
    let nextJti = 0;
    rows['limit: node:http + pg validate'] = await collections(limit.child, () => drive(`http://127.0.0.1:${limit.port}/validate`, {
      requests: [{ setupRequest: (req: any) => ({ ...req, body: JSON.stringify({ ...creds, token: jtis[nextJti++] }) }) }],
    } as Partial<autocannon.Options>));
    console.table(rows);
    // the 401 row is meant to fail; any other failure makes its row wrong
    for (const [name, row] of Object.entries(rows)) if (!name.includes('(401)') && (row as { 'not 2xx': number })['not 2xx'] > 0) console.log(`note: ${name}: answers that were not 2xx`);
    console.log('A request whose objects die young promotes next to nothing; a promoted share of more than a few per cent means garbage is keeping garbage alive.');
  } finally {
    await Promise.all(children.map(stopProcess));
    await db.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
