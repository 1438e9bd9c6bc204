import type { Queryable } from '../db/db.ts';

/** The tables the pruner deletes from. */
export const PRUNED_TABLES = ['sso_tokens', 'webhook_deliveries', 'webhook_attempts', 'audit_log', 'login_attempts', 'sessions', 'revoked_access_tokens', 'totp_pending', 'oidc_artefacts', 'webauthn_challenges'] as const;
export type PrunedTable = (typeof PRUNED_TABLES)[number];

/** Rows deleted (or that would be) per table. */
export type TableCounts = Partial<Record<PrunedTable, number>>;

/**
 * What one kind of row the pruner deletes is: rows of `table` whose `time` column is older
 * than the age given, and that satisfy `where`. `time` is indexed (for these rows), so a
 * batch walks the index oldest first and reads only what it deletes.
 */
interface SimpleTarget {
  table: PrunedTable;
  key: string;
  time: string;
  where: string;
}

/** How long a count of failed sign-ins with no lock is kept after its last failure. */
export const FAILED_LOGINS_KEPT_DAYS = 30;

/** The tables that are pruned by themselves (webhook deliveries go with their attempts). */
export const SIMPLE_TARGETS = {
  // Never an unused token whose token.expired event is not written: the sweep
  // (sso/expiry-sweep.ts) sets expiry_notified_at in the transaction that enqueues it.
  // The predicate is the one of the partial index sso_tokens_prunable.
  // Nor one from a browser sign-in whose session lives: a client system's logout with it
  // (POST /api/sso/logout) ends that session, however long after the token expired.
  sso_tokens: {
    table: 'sso_tokens', key: 'jti', time: 'expires_at',
    where: `(used_at IS NOT NULL OR invalidated_at IS NOT NULL OR expiry_notified_at IS NOT NULL)
      AND (session_id IS NULL OR NOT EXISTS (SELECT 1 FROM sessions s WHERE s.sid = sso_tokens.session_id AND s.expire > now()))`,
  },
  audit_log: { table: 'audit_log', key: 'id', time: 'at', where: 'true' },
  // A running lock is kept whatever its age (auth/queries.ts recordLoginFailure). A lock that
  // ended restarts the count at the next failure, so its row counts for nothing; a count of
  // failures without a lock does (DESIGN: the 5th consecutive failure locks, however far apart)
  // and is kept until FAILED_LOGINS_KEPT_DAYS without another one: only names nobody signs in
  // with, sprayed by someone, stay that long, and the table must not grow with them for ever.
  login_attempts: {
    table: 'login_attempts', key: 'login', time: 'updated_at',
    where: `locked_until <= now() OR (locked_until IS NULL AND updated_at < now() - interval '${FAILED_LOGINS_KEPT_DAYS} days')`,
  },
  sessions: { table: 'sessions', key: 'sid', time: 'expire', where: 'true' },
  revoked_access_tokens: { table: 'revoked_access_tokens', key: 'jti', time: 'expires_at', where: 'true' },
  // an expired two-factor setup is never read (src/auth/totp-pending-queries.ts)
  totp_pending: { table: 'totp_pending', key: 'owner', time: 'expires_at', where: 'true' },
  oidc_artefacts: { table: 'oidc_artefacts', key: 'pk', time: 'expires_at', where: 'true' },
  // a passkey ceremony's challenge past its expiry is refused anyway (src/passkeys/queries.ts takeChallenge)
  webauthn_challenges: { table: 'webauthn_challenges', key: 'challenge', time: 'expires_at', where: 'true' },
} satisfies Record<string, SimpleTarget>;

export type SimpleTargetName = keyof typeof SIMPLE_TARGETS;

/** One batch deleted: how many rows per table, and the newest `time` among them (the next batch's start). */
export interface BatchResult {
  counts: TableCounts;
  rows: number;
  last: Date | null;
}

const older = (column: string) => `${column} < now() - make_interval(secs => $1::double precision)`;
const from = (column: string) => `${column} >= coalesce($3::timestamptz, '-infinity'::timestamptz)`;

/**
 * Deletes up to `limit` rows of a table older than `ageSeconds`, oldest first, from `after`
 * on (the previous batch's newest, so a batch does not walk again over the index entries of
 * rows already deleted). SKIP LOCKED passes over rows another transaction holds (a failed
 * login being counted, another pruner), so the pruner never waits for anyone. The rows are
 * deleted by `key = ANY (ARRAY(...))`, a primary-key lookup each: written as a join, the
 * planner may hash the whole table to find a thousand rows.
 */
export async function deleteBatch(q: Queryable, name: SimpleTargetName, ageSeconds: number, limit: number, after: Date | null): Promise<BatchResult> {
  const t: SimpleTarget = SIMPLE_TARGETS[name];
  const r = await q.query<{ n: number; last: Date | null }>(
    `WITH doomed AS (
       SELECT ${t.key} AS k FROM ${t.table}
       WHERE ${older(t.time)} AND ${from(t.time)} AND (${t.where})
       ORDER BY ${t.time} LIMIT $2
       FOR UPDATE SKIP LOCKED
     ), gone AS (
       DELETE FROM ${t.table} WHERE ${t.key} = ANY (ARRAY(SELECT k FROM doomed)) RETURNING ${t.time} AS at
     )
     SELECT count(*)::int AS n, max(at) AS last FROM gone`,
    [ageSeconds, limit, after],
  );
  const { n, last } = r.rows[0];
  return { counts: { [t.table]: n }, rows: n, last: last === null ? null : new Date(last) };
}

/** How many rows deleteBatch would delete in all, for a dry run. */
export async function countPrunable(q: Queryable, name: SimpleTargetName, ageSeconds: number): Promise<TableCounts> {
  const t: SimpleTarget = SIMPLE_TARGETS[name];
  const r = await q.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${t.table} WHERE ${older(t.time)} AND (${t.where})`,
    [ageSeconds],
  );
  return { [t.table]: r.rows[0].n };
}

const FINISHED = "status IN ('succeeded', 'failed')"; // the predicate of webhook_deliveries_finished

/**
 * Deletes up to `limit` finished deliveries completed longer than `ageSeconds` ago, with
 * their attempts, in one statement. A pending delivery is never taken; a finished one being
 * queued again (webhooks/queries.ts requeueDelivery) is row-locked by that update and skipped.
 */
export async function deleteDeliveryBatch(q: Queryable, ageSeconds: number, limit: number, after: Date | null): Promise<BatchResult> {
  const r = await q.query<{ deliveries: number; attempts: number; last: Date | null }>(
    `WITH doomed AS (
       SELECT id FROM webhook_deliveries
       WHERE ${FINISHED} AND ${older('completed_at')} AND ${from('completed_at')}
       ORDER BY completed_at LIMIT $2
       FOR UPDATE SKIP LOCKED
     ), attempts AS (
       DELETE FROM webhook_attempts WHERE delivery_id = ANY (ARRAY(SELECT id FROM doomed)) RETURNING 1
     ), deliveries AS (
       DELETE FROM webhook_deliveries WHERE id = ANY (ARRAY(SELECT id FROM doomed)) RETURNING completed_at
     )
     SELECT (SELECT count(*) FROM deliveries)::int AS deliveries, (SELECT count(*) FROM attempts)::int AS attempts,
            (SELECT max(completed_at) FROM deliveries) AS last`,
    [ageSeconds, limit, after],
  );
  const { deliveries, attempts, last } = r.rows[0];
  return { counts: { webhook_deliveries: deliveries, webhook_attempts: attempts }, rows: deliveries, last: last === null ? null : new Date(last) };
}

/** How many deliveries and attempts deleteDeliveryBatch would delete in all, for a dry run. */
export async function countPrunableDeliveries(q: Queryable, ageSeconds: number): Promise<TableCounts> {
  const r = await q.query<{ deliveries: number; attempts: number }>(
    `WITH doomed AS (SELECT id FROM webhook_deliveries WHERE ${FINISHED} AND ${older('completed_at')})
     SELECT (SELECT count(*) FROM doomed)::int AS deliveries,
            (SELECT count(*) FROM webhook_attempts a WHERE a.delivery_id IN (SELECT id FROM doomed))::int AS attempts`,
    [ageSeconds],
  );
  return { webhook_deliveries: r.rows[0].deliveries, webhook_attempts: r.rows[0].attempts };
}

/**
 * Takes the pruning lock of one kind of row for the current transaction, without waiting:
 * false when another instance holds it (it is pruning these rows right now).
 */
export async function tryPruneLock(q: Queryable, lockClass: number, kind: number): Promise<boolean> {
  const r = await q.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock($1::int, $2::int) AS ok', [lockClass, kind]);
  return r.rows[0].ok;
}
