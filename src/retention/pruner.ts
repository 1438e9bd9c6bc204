import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Db, Queryable } from '../db/db.ts';
import type { Metrics } from '../metrics/metrics.ts';
import {
  type BatchResult, countPrunable, countPrunableDeliveries, deleteBatch, deleteDeliveryBatch, PRUNED_TABLES, type PrunedTable,
  type TableCounts, tryPruneLock,
} from './queries.ts';

/** SQLSTATE of a statement the database user has no right to (permission denied). */
const INSUFFICIENT_PRIVILEGE = '42501';

/** Rows per batch: each batch is one short transaction. */
export const PRUNE_BATCH_SIZE = 1000;

/**
 * After each full batch a pass rests this many times as long as the batch took: a backlog
 * (the first pass over years of rows) then takes at most a sixth of one connection, and
 * of the database's CPU, while the service answers requests.
 */
const REST_FACTOR = 5;

/** Arbitrary constant: the class of the advisory locks of pruning (the second key is the kind). */
const PRUNE_LOCK_CLASS = 7_240_118;

/**
 * The advisory lock (both keys of pg_advisory_xact_lock(int, int)) a batch of `table`'s
 * kind of row takes; another session holding it makes passes leave that kind alone.
 */
export function pruneLockOf(table: PrunedTable): [number, number] {
  return [PRUNE_LOCK_CLASS, kinds(NO_CONFIG).findIndex((k) => k.tables.includes(table))];
}

/** One kind of row pruned together: its tables, its age limit (null: kept forever), a batch and a count. */
interface Kind {
  tables: PrunedTable[];
  /** How old a row must be to go (null: kept forever, its retention is 0). */
  ageSeconds: number | null;
  batch(q: Queryable, ageSeconds: number, limit: number, after: Date | null): Promise<BatchResult>;
  count(q: Queryable, ageSeconds: number): Promise<TableCounts>;
}

/** How long past its token's expiry a revocation is kept: more than any clock skew between hosts. */
const REVOKED_TOKEN_MARGIN_SECONDS = 300;

function kinds(config: PruneConfig): Kind[] {
  const age = (ms: number) => (ms === 0 ? null : ms / 1000);
  return [
    { tables: ['sso_tokens'], ageSeconds: age(config.TOKEN_RETENTION),
      batch: (q, a, n, after) => deleteBatch(q, 'sso_tokens', a, n, after), count: (q, a) => countPrunable(q, 'sso_tokens', a) },
    { tables: ['webhook_deliveries', 'webhook_attempts'], ageSeconds: age(config.WEBHOOK_RETENTION), batch: deleteDeliveryBatch, count: countPrunableDeliveries },
    { tables: ['audit_log'], ageSeconds: age(config.AUDIT_RETENTION),
      batch: (q, a, n, after) => deleteBatch(q, 'audit_log', a, n, after), count: (q, a) => countPrunable(q, 'audit_log', a) },
    // A lock that ended (its row last written LOCKOUT_MINUTES ago), or a count idle for FAILED_LOGINS_KEPT_DAYS (queries.ts).
    { tables: ['login_attempts'], ageSeconds: config.LOCKOUT_MINUTES * 60,
      batch: (q, a, n, after) => deleteBatch(q, 'login_attempts', a, n, after), count: (q, a) => countPrunable(q, 'login_attempts', a) },
    // Expired sessions are never read (http/session.ts filters them): they go at once.
    { tables: ['sessions'], ageSeconds: 0,
      batch: (q, a, n, after) => deleteBatch(q, 'sessions', a, n, after), count: (q, a) => countPrunable(q, 'sessions', a) },
    // A signed-out access token past its exp is refused by its signature: its row can go, five
    // minutes later (an instance whose clock is behind the database's still honours exp until then).
    { tables: ['revoked_access_tokens'], ageSeconds: REVOKED_TOKEN_MARGIN_SECONDS,
      batch: (q, a, n, after) => deleteBatch(q, 'revoked_access_tokens', a, n, after), count: (q, a) => countPrunable(q, 'revoked_access_tokens', a) },
    // An expired two-factor setup is never read (auth/totp-pending-queries.ts): it goes at once.
    { tables: ['totp_pending'], ageSeconds: 0,
      batch: (q, a, n, after) => deleteBatch(q, 'totp_pending', a, n, after), count: (q, a) => countPrunable(q, 'totp_pending', a) },
    // OpenID Connect artefacts past their expiry are never read (src/oidc/queries.ts): they go
    // five minutes later, as revoked access tokens do (an instance whose clock is behind).
    { tables: ['oidc_artefacts'], ageSeconds: REVOKED_TOKEN_MARGIN_SECONDS,
      batch: (q, a, n, after) => deleteBatch(q, 'oidc_artefacts', a, n, after), count: (q, a) => countPrunable(q, 'oidc_artefacts', a) },
    // Passkey challenges that expired unused (a ceremony given up) are worthless: they go at once.
    { tables: ['webauthn_challenges'], ageSeconds: 0,
      batch: (q, a, n, after) => deleteBatch(q, 'webauthn_challenges', a, n, after), count: (q, a) => countPrunable(q, 'webauthn_challenges', a) },
  ];
}

const NO_CONFIG: PruneConfig = { TOKEN_RETENTION: 0, WEBHOOK_RETENTION: 0, AUDIT_RETENTION: 0, LOCKOUT_MINUTES: 0 };

/** The configuration keys a pass reads. */
export type PruneConfig = Pick<Config, 'TOKEN_RETENTION' | 'WEBHOOK_RETENTION' | 'AUDIT_RETENTION' | 'LOCKOUT_MINUTES'>;

/** What one pass did (or, dry, would do). */
export interface PruneReport {
  dryRun: boolean;
  /** Rows deleted per table (dry run: rows that a pass would delete now). */
  counts: Record<PrunedTable, number>;
  /** Tables whose retention is 0: nothing is ever deleted there. */
  keptForever: PrunedTable[];
  /** Tables another instance was pruning at the same moment: this pass left them to it. */
  leftToOthers: PrunedTable[];
  /**
   * Tables the database user may not delete from (an append-only audit log: UPDATE and
   * DELETE revoked, which the service otherwise supports): kept, and the pass goes on.
   */
  notPermitted: PrunedTable[];
}

export interface PruneOptions {
  dryRun?: boolean;
  batchSize?: number;
  /** Ends the pass between two batches (a stopping instance does not finish a backlog first). */
  signal?: AbortSignal;
  /** Counts deleted rows and the time of the pass. */
  metrics?: Pick<Metrics, 'prunedRows' | 'pruneLastPass'>;
}

/**
 * One pass: deletes, table by table, every row past its retention, in batches of
 * `batchSize`, each batch its own short transaction. A batch first takes the advisory lock
 * of its kind of row without waiting: when another instance holds it (it is pruning the
 * same rows this moment) this pass leaves that kind to it instead of racing it or queueing
 * behind it. After each full batch the pass rests (REST_FACTOR), so a backlog of millions
 * of rows never crowds out the requests. A dry run only counts.
 */
export async function prunePass(db: Db, config: PruneConfig, options: PruneOptions = {}): Promise<PruneReport> {
  const { dryRun = false, batchSize = PRUNE_BATCH_SIZE, signal, metrics } = options;
  const counts = Object.fromEntries(PRUNED_TABLES.map((t) => [t, 0])) as Record<PrunedTable, number>;
  const report: PruneReport = { dryRun, counts, keptForever: [], leftToOthers: [], notPermitted: [] };
  const add = (c: TableCounts) => {
    for (const [table, n] of Object.entries(c) as Array<[PrunedTable, number]>) {
      counts[table] += n;
      if (!dryRun && n > 0) metrics?.prunedRows.inc({ table }, n);
    }
  };
  for (const [index, kind] of kinds(config).entries()) {
    if (kind.ageSeconds === null) {
      report.keptForever.push(...kind.tables);
      continue;
    }
    const ageSeconds = kind.ageSeconds;
    if (dryRun) {
      add(await kind.count(db, ageSeconds));
      continue;
    }
    let after: Date | null = null;
    while (!signal?.aborted) {
      const started = performance.now();
      let batch: BatchResult | null;
      try {
        batch = await db.transaction(async (tx) =>
          (await tryPruneLock(tx, PRUNE_LOCK_CLASS, index)) ? kind.batch(tx, ageSeconds, batchSize, after) : null);
      } catch (err) {
        // one kind the user may not delete must not keep the others (sessions, counters) for ever
        if ((err as { code?: unknown }).code !== INSUFFICIENT_PRIVILEGE) throw err;
        report.notPermitted.push(...kind.tables);
        break;
      }
      if (batch === null) {
        report.leftToOthers.push(...kind.tables);
        break;
      }
      add(batch.counts);
      if (batch.rows < batchSize) break;
      after = batch.last;
      await sleep(REST_FACTOR * (performance.now() - started), undefined, { signal }).catch(() => {});
    }
  }
  if (!dryRun) metrics?.pruneLastPass.set(Date.now() / 1000);
  return report;
}

/**
 * Prunes every `config.PRUNE_INTERVAL` in the background (never, when it is 0). A pass that
 * fails is logged and tried again at the next interval. `stop` ends the pass in progress
 * after its current batch and waits for that.
 */
export function startPruner(options: {
  db: Db;
  config: PruneConfig & Pick<Config, 'PRUNE_INTERVAL'>;
  logger: Logger;
  metrics?: PruneOptions['metrics'];
}): { stop(): Promise<void> } {
  const { db, config, logger, metrics } = options;
  const warned = new Set<PrunedTable>();
  if (config.PRUNE_INTERVAL === 0) return { stop: async () => {} };
  const abort = new AbortController();
  let running: Promise<void> | null = null;
  const tick = () => {
    if (running) return;
    const started = Date.now();
    running = prunePass(db, config, { signal: abort.signal, metrics })
      .then((report) => {
        const deleted = Object.fromEntries(Object.entries(report.counts).filter(([, n]) => n > 0));
        if (Object.keys(deleted).length > 0) logger.info({ deleted, ms: Date.now() - started }, 'pruned rows past retention');
        // said once per process: every pass finds the same
        const refused = report.notPermitted.filter((t) => !warned.has(t));
        for (const t of refused) warned.add(t);
        if (refused.length > 0) {
          logger.warn({ tables: refused }, 'the database user may not delete from these tables: their rows are kept whatever the retention says (set the retention to 0 to keep them on purpose, or grant DELETE and UPDATE)');
        }
      })
      .catch((err) => logger.warn({ err }, 'pruning failed; retrying next interval'))
      .finally(() => {
        running = null;
      });
  };
  const timer = setInterval(tick, config.PRUNE_INTERVAL);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      abort.abort();
      await running;
    },
  };
}
