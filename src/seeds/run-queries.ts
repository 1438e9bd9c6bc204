import type { Queryable } from '../db/db.ts';

/**
 * The run's own state, which a seed file may not touch: the audit actor the runner names for
 * each file, and the catalog writes that would let a file write audit entries from a trigger of
 * its own. Together with migrations/0028_seed_audit_guard.sql they keep a seed from forging
 * audit entries: the guard refuses an entry written by a statement of the file (not from a
 * trigger) or under another auth.actor than the run's; these refuse a file that gets around the
 * guard (drops or writes the run's table, creates or replaces a trigger or a function).
 */

/**
 * Names the actor of the file about to run: auth.actor for the clients triggers, and the same
 * value in pg_temp.seed_run, which the audit guard compares it with (guardSeedCommit creates it).
 */
export async function setRunActor(tx: Queryable, actor: Record<string, unknown>): Promise<void> {
  const json = JSON.stringify(actor);
  await tx.query("SELECT set_config('auth.actor', $1, true)", [json]);
  await tx.query('UPDATE pg_temp.seed_run SET actor = $1::jsonb', [json]);
}

/** What runState compares before and after a file. */
export interface RunState {
  /** pg_temp.seed_run's oid (null: gone) and the rows written to it in this transaction. */
  table: string | null;
  tableWrites: number;
  /** Rows this transaction wrote to pg_trigger and pg_event_trigger, and rows of pg_proc it updated. */
  triggers: number;
  eventTriggers: number;
  functionsReplaced: number;
}

export async function runState(q: Queryable): Promise<RunState> {
  const r = await q.query<{ table: string | null; table_writes: string; triggers: string; event_triggers: string; replaced: string }>(
    `SELECT pg_catalog.to_regclass('pg_temp.seed_run')::oid::text AS table,
            (SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_catalog.pg_stat_xact_user_tables
              WHERE relid = pg_catalog.to_regclass('pg_temp.seed_run'))::text AS table_writes,
            (SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_catalog.pg_stat_xact_sys_tables WHERE relid = 'pg_catalog.pg_trigger'::regclass)::text AS triggers,
            (SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_catalog.pg_stat_xact_sys_tables WHERE relid = 'pg_catalog.pg_event_trigger'::regclass)::text AS event_triggers,
            (SELECT coalesce(sum(n_tup_upd), 0) FROM pg_catalog.pg_stat_xact_sys_tables WHERE relid = 'pg_catalog.pg_proc'::regclass)::text AS replaced`,
  );
  const row = r.rows[0];
  return {
    table: row.table, tableWrites: Number(row.table_writes), triggers: Number(row.triggers), eventTriggers: Number(row.event_triggers), functionsReplaced: Number(row.replaced),
  };
}

/** What a file did to the run's own state (runState before and after it); empty when nothing. */
export function runStateTouched(before: RunState, after: RunState): string[] {
  const problems: string[] = [];
  if (after.table === null || after.table !== before.table || after.tableWrites !== before.tableWrites) problems.push('dropped or wrote the run\'s own table pg_temp.seed_run');
  if (after.triggers !== before.triggers) problems.push('created, changed or dropped a trigger');
  if (after.eventTriggers !== before.eventTriggers) problems.push('created, changed or dropped an event trigger');
  if (after.functionsReplaced !== before.functionsReplaced) problems.push('replaced or altered a function');
  return problems;
}

/**
 * Ends the audit guard for the runner's own writes after the files (webhooks, --prune): drops
 * pg_temp.seed_run, and names `actor` (the run, no file) for the clients triggers.
 */
export async function endRunGuard(tx: Queryable, actor: Record<string, unknown>): Promise<void> {
  await tx.query('DROP TABLE pg_temp.seed_run');
  await tx.query("SELECT set_config('auth.actor', $1, true)", [JSON.stringify(actor)]);
}

/**
 * The clients the run wrote (inserted, or updated, changed or not: an upsert of an unchanged
 * row writes it too), read from the rows themselves: a row version this transaction wrote has
 * its id (or one of its subtransactions') as xmin, and a row version written by a transaction
 * still in progress is visible to no other. Ids between the run's first id and the next to be
 * assigned are asked about (txid_status); across an epoch boundary, only the run's first id.
 */
export async function writtenClientIds(q: Queryable): Promise<Set<string>> {
  const r = await q.query<{ client_id: string }>(
    `WITH t AS (SELECT pg_catalog.txid_current() AS top, pg_catalog.txid_snapshot_xmax(pg_catalog.txid_current_snapshot()) AS next)
     SELECT c.client_id FROM clients c, t
      WHERE c.xmin::text::bigint = t.top % 4294967296
         OR CASE WHEN t.top >> 32 = t.next >> 32 AND c.xmin::text::bigint > t.top % 4294967296 AND c.xmin::text::bigint < t.next % 4294967296
                 THEN pg_catalog.txid_status(((t.top >> 32) << 32) + c.xmin::text::bigint) = 'in progress' ELSE false END`,
  );
  return new Set(r.rows.map((row) => row.client_id));
}

/** Deletes the clients not named (--prune); the clients triggers audit each. Returns the ids deleted. */
export async function deleteClientsExcept(q: Queryable, keep: readonly string[]): Promise<string[]> {
  const r = await q.query<{ client_id: string }>('DELETE FROM clients WHERE NOT (client_id = ANY ($1::text[])) RETURNING client_id', [keep]);
  return r.rows.map((row) => row.client_id).sort();
}
