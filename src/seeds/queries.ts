import type { SchemaDefinitions, TableState } from './table-writes.ts';
import type { Queryable } from '../db/db.ts';

/** Each client's callback URL, by client id. */
export async function clientCallbacks(q: Queryable): Promise<Map<string, string>> {
  const r = await q.query<{ client_id: string; callback_url: string }>('SELECT client_id, callback_url FROM clients');
  return new Map(r.rows.map((row) => [row.client_id, row.callback_url]));
}

/**
 * Makes a COMMIT inside a seed file fail: a deferred constraint trigger on a temporary
 * table of this run (gone with it) refuses every commit but the runner's own, which says so
 * first with the transaction-local auth.seed_commit. The COMMIT then errors and the whole run
 * is rolled back, whatever the file looked like to transactionControl (a string setting such
 * as standard_conforming_strings = off changes how quotes read). CREATE OR REPLACE: a pooled
 * connection keeps pg_temp's function from an earlier run. The temporary table also gives the
 * transaction its id (see transactionId) before any file runs. The temporary table seed_run
 * holds the run's audit actor: while it exists, the audit log takes only entries written by
 * triggers under that actor (migrations/0028_seed_audit_guard.sql; src/seeds/run-queries.ts).
 */
export async function guardSeedCommit(tx: Queryable): Promise<void> {
  await tx.exec(`
  CREATE TEMPORARY TABLE seed_run_guard (run int) ON COMMIT DROP;
  CREATE OR REPLACE FUNCTION pg_temp.seed_run_guard() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF current_setting('auth.seed_commit', true) IS DISTINCT FROM 'runner' THEN
      RAISE EXCEPTION 'COMMIT inside a seed file: a seed run is one transaction of its own; remove BEGIN/COMMIT/ROLLBACK from the file'
        USING ERRCODE = 'invalid_transaction_termination';
    END IF;
    RETURN NULL;
  END $$;
  CREATE CONSTRAINT TRIGGER seed_run_guard AFTER INSERT ON pg_temp.seed_run_guard
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pg_temp.seed_run_guard();
  INSERT INTO pg_temp.seed_run_guard VALUES (1);
  CREATE TEMPORARY TABLE seed_run (actor jsonb) ON COMMIT DROP;
  INSERT INTO pg_temp.seed_run VALUES (NULL);`);
}

/**
 * Makes seed runs wait for each other (a transaction-level advisory lock, released at its
 * end): two runs at once each read the clients before the other's commit, and both reported
 * the same client as created. Taken before the run reads what there was.
 */
export async function lockSeedRuns(tx: Queryable): Promise<void> {
  await tx.query("SELECT pg_advisory_xact_lock(hashtext('auth-service seed run'))");
}

/** The runner's own COMMIT, the one guardSeedCommit lets through: to be called last in the run. */
export async function allowSeedCommit(tx: Queryable): Promise<void> {
  await tx.query("SELECT set_config('auth.seed_commit', 'runner', true)");
}

/** The id of the transaction `q` is in (a new one each time outside a transaction). */
export async function transactionId(q: Queryable): Promise<string> {
  return (await q.query<{ id: string }>('SELECT txid_current()::text AS id')).rows[0].id;
}

/** A session's settings a seed file can change for the session (SET without LOCAL, set_config(..., false), SET ROLE). */
export interface SessionSettings {
  settings: Map<string, { value: string | null; bySession: boolean }>;
  role: string;
}

/**
 * Whether the name is one a seed file's SET is undone for: not the runner's own transaction
 * settings (auth.*) nor the transaction's (transaction_isolation ...), and only a plain name
 * (it is written into RESET).
 */
const RESTORED = /^(?!auth\.|transaction_)[A-Za-z][A-Za-z0-9_.]*$/;

/** The session's settings now (what restoreSessionSettings puts back). */
export async function sessionSettings(q: Queryable): Promise<SessionSettings> {
  const r = await q.query<{ name: string; setting: string | null; by_session: boolean }>(
    "SELECT name, setting, source = 'session' AS by_session FROM pg_settings WHERE context IN ('user', 'superuser')",
  );
  return { settings: new Map(r.rows.filter((row) => RESTORED.test(row.name)).map((row) => [row.name, { value: row.setting, bySession: row.by_session }])), role: await currentRole(q) };
}

/** The role the session acts as (SET ROLE), 'none' when it acts as itself. */
async function currentRole(q: Queryable): Promise<string> {
  return (await q.query<{ role: string }>("SELECT current_setting('role') AS role")).rows[0].role;
}

/**
 * Puts back, for the session, what the statements since `before` changed for it: a seed file's
 * `SET x = ...` (a dump's header sets several) would otherwise outlive the run in the session
 * that ran it, which on the embedded database is the running service's own (its socket
 * shares the one session), e.g. session_replication_role = replica would switch the clients
 * triggers off for every later change. Runs in the run's transaction, so takes effect with it.
 * Returns the names put back.
 */
export async function restoreSessionSettings(q: Queryable, before: SessionSettings): Promise<string[]> {
  const restored: string[] = [];
  // the role first: the settings below may need the session's own rights
  if ((await currentRole(q)) !== before.role) {
    await q.query('RESET ROLE');
    restored.push('role');
  }
  const now = await sessionSettings(q);
  for (const [name, after] of now.settings) {
    const was = before.settings.get(name);
    if (!after.bySession && !was?.bySession) continue;
    if (was && after.value === was.value && after.bySession === was.bySession) continue;
    if (was?.bySession) await q.query('SELECT set_config($1, $2, false)', [name, was.value ?? '']);
    else await q.query(`RESET ${name}`);
    restored.push(name);
  }
  return restored;
}

/**
 * What keeps the clients table's triggers from firing now: a trigger of the table switched
 * off (ALTER TABLE ... DISABLE TRIGGER), or the session's replication role (`replica` fires
 * only triggers enabled ALWAYS or REPLICA, `local` likewise). Empty when every one fires.
 */
export async function clientTriggersOff(q: Queryable, table: ClientsTable): Promise<string[]> {
  const r = await q.query<{ what: string }>(
    `SELECT 'trigger ' || tgname AS what FROM pg_catalog.pg_trigger
      WHERE tgrelid = $1::oid AND NOT tgisinternal AND tgenabled NOT IN ('O', 'A')
     UNION ALL
     SELECT 'session_replication_role = ' || pg_catalog.current_setting('session_replication_role')
      WHERE pg_catalog.current_setting('session_replication_role') <> 'origin'`,
    [table.oid],
  );
  return r.rows.map((row) => row.what);
}

/** The clients table, found before any file runs: a file may empty the search_path (a dump's header does). */
export interface ClientsTable {
  oid: string;
  /** Its schema's name, quoted as an identifier where it must be (regnamespace's text): the service's other tables are beside it. */
  schema: string;
}

export async function clientsTable(q: Queryable): Promise<ClientsTable> {
  const r = await q.query<{ oid: string; schema: string }>(
    "SELECT 'clients'::regclass::oid::text AS oid, relnamespace::regnamespace::text AS schema FROM pg_catalog.pg_class WHERE oid = 'clients'::regclass");
  return r.rows[0];
}

/** Every table of the service's schema (the clients table's), by oid. */
export async function tableStates(q: Queryable, clientsOid: string): Promise<Map<string, TableState>> {
  const r = await q.query<{ oid: string; name: string; inserted: string; updated: string; deleted: string; storage: string }>(
    `SELECT c.oid::text AS oid, c.relname AS name,
            coalesce(s.n_tup_ins, 0)::text AS inserted, coalesce(s.n_tup_upd, 0)::text AS updated,
            coalesce(s.n_tup_del, 0)::text AS deleted, c.relfilenode::text AS storage
       FROM pg_catalog.pg_class c
       LEFT JOIN pg_catalog.pg_stat_xact_user_tables s ON s.relid = c.oid
      WHERE c.relkind IN ('r', 'p') AND c.relnamespace = (SELECT relnamespace FROM pg_catalog.pg_class WHERE oid = $1::oid)`,
    [clientsOid],
  );
  return new Map(r.rows.map((row) => [row.oid, {
    name: row.name, inserted: Number(row.inserted), updated: Number(row.updated), deleted: Number(row.deleted), storage: row.storage,
  }]));
}

/** The tables this transaction holds exclusively (a table the file dropped among them), by oid. */
export async function tablesHeldExclusively(q: Queryable): Promise<Set<string>> {
  const r = await q.query<{ oid: string }>(
    "SELECT relation::text AS oid FROM pg_catalog.pg_locks WHERE pid = pg_catalog.pg_backend_pid() AND mode = 'AccessExclusiveLock' AND relation IS NOT NULL");
  return new Set(r.rows.map((row) => row.oid));
}

/**
 * The definitions in the service's schema, each as a key and a digest: functions (bodies,
 * settings, security), and per relation its triggers, columns and defaults, privileges, rules,
 * policies and constraints (`rel`: the relation's oid). A seed file that changes any of them (a
 * trigger function replaced by an empty one, a default of role 'admin') changes an entry; rows
 * never do. See changedDefinitions (src/seeds/table-writes.ts).
 */
export async function schemaDefinitions(q: Queryable, table: ClientsTable): Promise<SchemaDefinitions> {
  const r = await q.query<{ rel: string | null; key: string; digest: string }>(
    // keys by name and oid, never by regclass or regprocedure text: those depend on the
    // search_path, which a file may change (a dump's header empties it)
    `WITH ns AS (SELECT relnamespace AS oid FROM pg_catalog.pg_class WHERE oid = $1::oid)
     SELECT NULL AS rel, 'function ' || p.proname || ' (' || p.oid || ')' AS key,
            pg_catalog.md5(pg_catalog.concat_ws(':', p.prosrc, p.proconfig::text, p.prosecdef, p.provolatile::text)) AS digest
       FROM pg_catalog.pg_proc p, ns WHERE p.pronamespace = ns.oid
     UNION ALL SELECT t.tgrelid::text, 'trigger ' || t.tgname || ' on ' || c.relname, pg_catalog.concat_ws(':', t.tgfoid, t.tgenabled::text, t.tgtype)
       FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid, ns WHERE c.relnamespace = ns.oid
     UNION ALL SELECT d.adrelid::text, 'default of ' || c.relname || '.' || d.adnum, pg_catalog.md5(d.adbin::text)
       FROM pg_catalog.pg_attrdef d JOIN pg_catalog.pg_class c ON c.oid = d.adrelid, ns WHERE c.relnamespace = ns.oid
     UNION ALL SELECT a.attrelid::text, 'column ' || c.relname || '.' || a.attnum,
            pg_catalog.concat_ws(':', a.attname, a.atttypid, a.attnotnull, a.attisdropped, a.attacl::text)
       FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid, ns WHERE c.relnamespace = ns.oid AND a.attnum > 0
     UNION ALL SELECT c.oid::text, 'relation ' || c.relname, pg_catalog.concat_ws(':', c.relkind::text, c.relacl::text, c.relrowsecurity, c.relforcerowsecurity)
       FROM pg_catalog.pg_class c, ns WHERE c.relnamespace = ns.oid
     UNION ALL SELECT w.ev_class::text, 'rule ' || w.rulename || ' on ' || c.relname, w.oid::text
       FROM pg_catalog.pg_rewrite w JOIN pg_catalog.pg_class c ON c.oid = w.ev_class, ns WHERE c.relnamespace = ns.oid
     UNION ALL SELECT y.polrelid::text, 'policy ' || y.polname || ' on ' || c.relname, y.oid::text
       FROM pg_catalog.pg_policy y JOIN pg_catalog.pg_class c ON c.oid = y.polrelid, ns WHERE c.relnamespace = ns.oid
     UNION ALL SELECT k.conrelid::text, 'constraint ' || k.conname || ' on ' || k.conrelid, pg_catalog.concat_ws(':', k.convalidated, k.condeferrable)
       FROM pg_catalog.pg_constraint k, ns WHERE k.connamespace = ns.oid AND k.conrelid <> 0`,
    [table.oid],
  );
  return new Map(r.rows.map((row) => [row.key, { rel: row.rel, digest: row.digest }]));
}

/** Whether the statistics the table-write check reads are being counted (track_counts). */
export async function countingRows(q: Queryable): Promise<boolean> {
  return (await q.query<{ on: boolean }>("SELECT pg_catalog.current_setting('track_counts')::boolean AS on")).rows[0].on;
}

/** The highest audit row id so far: the rows a file adds come after it. */
export async function auditHighWater(q: Queryable, table: ClientsTable): Promise<string> {
  return (await q.query<{ id: string }>(`SELECT coalesce(max(id), 0)::text AS id FROM ${table.schema}.audit_log`)).rows[0].id;
}

/** The audit rows after `afterId` that the clients table's triggers did not write for a seed (anything but client.*, via seed). */
export async function otherAuditRowsSince(q: Queryable, table: ClientsTable, afterId: string): Promise<number> {
  return (await q.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${table.schema}.audit_log
      WHERE id > $1::bigint AND NOT (action LIKE 'client.%' AND details->>'via' IS NOT DISTINCT FROM 'seed')`, [afterId])).rows[0].n;
}

/** The ids of the clients, read from the service's schema. */
export async function clientIds(q: Queryable, table: ClientsTable): Promise<Set<string>> {
  return new Set((await q.query<{ client_id: string }>(`SELECT client_id FROM ${table.schema}.clients`)).rows.map((r) => r.client_id));
}

/** How many dashboard links each client has (a seed file may delete a client's links only with the client). */
export async function linksByClient(q: Queryable, table: ClientsTable): Promise<Map<string, number>> {
  const r = await q.query<{ client_id: string; n: number }>(`SELECT client_id, count(*)::int AS n FROM ${table.schema}.user_client_links GROUP BY client_id`);
  return new Map(r.rows.map((row) => [row.client_id, row.n]));
}

/** The webhooks a new client's client.registered is delivered to (the clients trigger's choice). */
export async function registeredSubscribers(q: Queryable, table: ClientsTable): Promise<number> {
  return (await q.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${table.schema}.webhooks WHERE active AND 'client.registered' = ANY (events)`)).rows[0].n;
}
