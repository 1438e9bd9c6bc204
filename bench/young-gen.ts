/**
 * npm run bench:young-gen: what V8's young generation (node --max-semi-space-size) buys the
 * hot paths and what it costs in memory, each size beside the start script's (the reference)
 * in the same run.
 *
 * One service process per size in YOUNG_GEN_SIZES (space-separated MiB, `default` for the start
 * script's flags as they are; default "default 16 64"), all on one fresh PostgreSQL database,
 * started at once (as deployed: dist/, the start script's flags, then --max-semi-space-size).
 * In each of YOUNG_GEN_ROUNDS rounds (default 5) each process in turn (the order turned every
 * round: the machine's speed drifts) gets token issue for YOUNG_GEN_SECONDS (default 8) at
 * BENCH_CONNECTIONS (default 50), then validation of every token it issued. Printed per size:
 * the median req/s of each, as a share of the reference's in the same rounds, and the process's
 * resident memory (VmRSS) after starting, after the rounds, and after YOUNG_GEN_IDLE seconds
 * (default 30) idle.
 *
 * NODE_FLAG_SETS compares other node options the same way: sets separated by `|`, each added
 * to the start script's flags (`default` for none), e.g. "default|--heap-growing-percent=10";
 * given, it replaces YOUNG_GEN_SIZES.
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) names the server.
 */
import { type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import {
  benchDatabase, benchServiceEnv, createBenchClient, DEFAULT_ADMIN_URL, loadUntilLastAnswer, median, NODE_FLAGS, postJson, SERVICE_ROOT, serviceEntry,
  startProcess, stopProcess,
} from './support.ts';

const SIZES = (process.env.YOUNG_GEN_SIZES ?? 'default 16 64').split(/\s+/).filter(Boolean);
/** The variants compared: a label and the flags added to the start script's. */
const VARIANTS: Array<{ label: string; flags: string[] }> = process.env.NODE_FLAG_SETS !== undefined
  ? process.env.NODE_FLAG_SETS.split('|').map((set) => set.trim()).filter(Boolean).map((set) => ({ label: set, flags: set === 'default' ? [] : set.split(/\s+/) }))
  : SIZES.map((size) => ({ label: size, flags: size === 'default' ? [] : [`--max-semi-space-size=${size}`] }));
const ROUNDS = Number(process.env.YOUNG_GEN_ROUNDS ?? 5);
const SECONDS = Number(process.env.YOUNG_GEN_SECONDS ?? 8);
const IDLE = Number(process.env.YOUNG_GEN_IDLE ?? 30);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const adminUrl = process.env.DATABASE_URL ?? DEFAULT_ADMIN_URL;
const MB = 1024 * 1024;

const rssOf = (pid: number): number => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;

interface Served { label: string; child: ChildProcess; base: string; issue: number[]; validate: number[]; rss: { started: number; loaded: number; idle: number } }

async function main() {
  if (VARIANTS.length === 0) throw new Error('NODE_FLAG_SETS / YOUNG_GEN_SIZES: nothing to compare');
  if (process.env.NODE_FLAG_SETS !== undefined) {
    for (const v of VARIANTS) if (v.flags.some((f) => !f.startsWith('--'))) throw new Error(`NODE_FLAG_SETS: "${v.label}" is neither node options nor "default"`);
  } else {
    for (const size of SIZES) if (size !== 'default' && !/^\d+$/.test(size)) throw new Error(`YOUNG_GEN_SIZES: "${size}" is neither a number of MiB nor "default"`);
  }
  const db = await benchDatabase(adminUrl, 'auth_bench_yg');
  const served: Served[] = [];
  try {
    const entry = serviceEntry();
    for (const { label, flags } of VARIANTS) {
      // one after the other: the first migrates the database
      const { child, port } = await startProcess(entry, benchServiceEnv(db.url), '/readyz', SERVICE_ROOT, { nodeFlags: flags });
      served.push({ label, child, base: `http://127.0.0.1:${port}`, issue: [], validate: [], rss: { started: 0, loaded: 0, idle: 0 } });
    }
    console.log(`service: ${entry}; start script's node options: ${NODE_FLAGS.join(' ') || '(none)'}; compared: ${VARIANTS.map((v) => v.label).join(', ')}`
      + (process.env.NODE_FLAG_SETS === undefined ? ' (MiB a semi-space)' : ' (node options added)'));
    const { creds } = createBenchClient(db.url);
    for (const s of served) {
      s.rss.started = rssOf(s.child.pid!);
      const probe = await postJson(`${s.base}/api/sso/token`, { ...creds, username: 'bench' });
      if (!probe.token) throw new Error(`token issue failed: ${JSON.stringify(probe)}`);
    }
    const json = { method: 'POST' as const, headers: { 'content-type': 'application/json' } };
    for (let round = 1; round <= ROUNDS; round++) {
      for (const s of round % 2 ? served : [...served].reverse()) {
        const tokens: string[] = [];
        const issued = await loadUntilLastAnswer({ ...json, url: `${s.base}/api/sso/token`, connections: CONNECTIONS, duration: SECONDS, body: JSON.stringify({ ...creds, username: 'bench' }) }, (status, body) => {
          if (status === 200) tokens.push(JSON.parse(body).token);
        });
        let next = 0;
        const validated = await loadUntilLastAnswer({
          ...json, url: `${s.base}/api/sso/validate`, connections: CONNECTIONS, amount: tokens.length,
          requests: [{ setupRequest: (req: any) => ({ ...req, body: JSON.stringify({ ...creds, token: tokens[next++] }) }) }],
        });
        const wrong = issued.result.non2xx + issued.result.errors + validated.result.non2xx + validated.result.errors;
        if (wrong > 0) throw new Error(`${s.label}: ${wrong} answers were not 200`);
        s.issue.push(issued.result.requests.total / issued.seconds);
        s.validate.push(validated.result.requests.total / validated.seconds);
      }
    }
    for (const s of served) s.rss.loaded = rssOf(s.child.pid!);
    await new Promise((r) => setTimeout(r, IDLE * 1000));
    for (const s of served) s.rss.idle = rssOf(s.child.pid!);

    const ref = served[0];
    const share = (a: number[], b: number[]) => `${Math.round((median(a) / median(b)) * 100)}%`;
    console.log(`Medians of ${ROUNDS} rounds, ${SECONDS} s of token issue then validation of those tokens each, ${CONNECTIONS} connections; the first row is the reference:`);
    console.table(served.map((s) => ({
      [process.env.NODE_FLAG_SETS === undefined ? 'semi-space MiB' : 'node options added']: s.label,
      'issue req/s': Math.round(median(s.issue)),
      'issue vs ref': share(s.issue, ref.issue),
      'validate req/s': Math.round(median(s.validate)),
      'validate vs ref': share(s.validate, ref.validate),
      'RSS started MB': Math.round(s.rss.started / MB),
      'RSS after load MB': Math.round(s.rss.loaded / MB),
      [`RSS ${IDLE} s later MB`]: Math.round(s.rss.idle / MB),
    })));
  } finally {
    await Promise.all(served.map((s) => stopProcess(s.child)));
    await db.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
