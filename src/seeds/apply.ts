import type { Db, Queryable } from '../db/db.ts';
import { lockForMigration } from '../db/migrate.ts';
import { checkCallbackUrl } from '../clients/fields.ts';
import { AppError } from '../http/errors.ts';
import { type GuardPolicy, type Lookup } from '../webhooks/address-guard.ts';
import { clientColumns, clientRows } from './column-queries.ts';
import { changedColumns, type ClientColumn, type ClientRow, SECRET_CLIENT_COLUMNS } from './columns.ts';
import { SeedError, SeedTransactionEndedError } from './errors.ts';
import { changedDefinitions, writesBeyondClients } from './table-writes.ts';
import {
  allowSeedCommit, clientCallbacks, type ClientsTable, clientsTable, clientTriggersOff, guardSeedCommit, lockSeedRuns, restoreSessionSettings, sessionSettings, tableStates, transactionId,
  auditHighWater, clientIds, countingRows, linksByClient, otherAuditRowsSince, registeredSubscribers, schemaDefinitions, tablesHeldExclusively,
} from './queries.ts';
import { deleteClientsExcept, endRunGuard, runState, runStateTouched, setRunActor, writtenClientIds } from './run-queries.ts';
import { transactionControl, triggerSwitch } from './scan.ts';
import { createWebhookStage, stagedWebhooks } from './webhook-queries.ts';
import { applySeedWebhooks, type WebhookChange } from './webhooks.ts';

export { SeedError, SeedTransactionEndedError } from './errors.ts';
export { transactionControl, triggerSwitch } from './scan.ts';
export type { WebhookChange } from './webhooks.ts';

/** One seed file: the name it is reported by and its SQL. */
export interface SeedFile {
  name: string;
  sql: string;
}

/**
 * What a run did (or a plan would do) to one client. `columns`: for a created client its
 * documented columns, for a changed one each changed column as { from, to }; a secret's hash
 * is never shown: "set" or "changed" (SECRET_CLIENT_COLUMNS). "not in the files": a client the
 * files do not write, kept (the files own every client: --prune deletes it).
 */
export interface ClientChange {
  client_id: string;
  change: 'created' | 'changed' | 'deleted' | 'unchanged' | 'not in the files';
  columns?: Record<string, unknown>;
}

/** What a seed run changed (or, planned, would change): counts by client id, and each client and webhook. */
export interface SeedResult {
  files: string[];
  created: string[];
  updated: string[];
  deleted: string[];
  unchanged: number;
  clients: ClientChange[];
  webhooks: WebhookChange[];
}

/** How a run goes. */
export interface SeedOptions {
  /** In production a callback set by the run is held to the API's rule, and webhook URLs to the address guard. */
  production?: boolean;
  /** Run everything, then roll it all back: the result says what applying would do; nothing is written, audited or announced. */
  plan?: boolean;
  /** Delete the clients and webhooks the files do not write. */
  prune?: boolean;
  /** Where webhook registrations' secret_env are read (default: none set). */
  env?: Record<string, string | undefined>;
  /** How webhook URLs are checked (default: the address guard in production only). */
  webhookPolicy?: GuardPolicy;
  lookup?: Lookup;
  /** Take the migration lock first (SEED_ON_START: instances starting together apply one after another). */
  migrationLock?: boolean;
}

/** Thrown inside a planned run's transaction to roll it back with its result. */
class PlannedRollback extends Error {
  constructor(readonly result: SeedResult) {
    super('planned run rolled back');
  }
}

/**
 * Applies seed files in the order given, all in one transaction: when any statement of any
 * file fails, nothing of the run stays. The database checks every client row and audits and
 * announces each change itself (migrations/0002_clients_as_sql.sql); here each file is named
 * as the actor, so the audit log says which file made a change, and the audit log takes no
 * entry but the triggers' under that actor (migrations/0028_seed_audit_guard.sql). Webhook
 * registrations the files stage are validated and written after them (src/seeds/webhooks.ts).
 * With `plan`, the same run is rolled back at the end and its result returned.
 */
export async function applySeeds(db: Db, files: readonly SeedFile[], actor: { user?: string } = {}, options: SeedOptions = {}): Promise<SeedResult> {
  for (const file of files) {
    const control = transactionControl(file.sql);
    if (control) {
      throw new SeedError(file.name, `"${control}": a seed run is one transaction of its own; remove BEGIN/COMMIT/ROLLBACK from the file`);
    }
    const off = triggerSwitch(file.sql);
    if (off) throw new SeedError(file.name, `"${off}": ${TRIGGERS_STAY_ON}`);
    if (/\btrack_counts\b/i.test(file.sql)) throw new SeedError(file.name, `"track_counts": ${WRITES_COUNTED}`);
  }
  try {
    return await db.transaction(async (tx) => {
      const result = await run(tx, files, actor.user ?? null, options);
      if (options.plan) throw new PlannedRollback(result);
      return result;
    });
  } catch (err) {
    if (err instanceof PlannedRollback) return err.result;
    throw err;
  }
}

async function run(tx: Queryable, files: readonly SeedFile[], user: string | null, options: SeedOptions): Promise<SeedResult> {
  // A COMMIT the scan missed fails (see guardSeedCommit); a ROLLBACK cannot be made to fail,
  // but it shows: the statements after it run in a transaction of their own, with another id.
  await guardSeedCommit(tx);
  await createWebhookStage(tx);
  if (options.migrationLock) await lockForMigration(tx);
  await lockSeedRuns(tx);
  const runId = await transactionId(tx);
  const columns = await clientColumns(tx);
  const before = await clientRows(tx, columns);
  const callbacksBefore = options.production ? await clientCallbacks(tx) : undefined; // only production holds callbacks to https
  const session = await sessionSettings(tx);
  const table = await clientsTable(tx);
  for (const file of files) {
    await setRunActor(tx, { via: 'seed', file: file.name, actor: user });
    await runFile(tx, file, table, runId);
  }
  // what a file SET for its session ends with the run (the service's own session on the embedded database)
  await restoreSessionSettings(tx, session);
  const written = await writtenClientIds(tx);
  // the runner's own writes from here: webhooks and --prune, audited with the run as the actor
  const runActor = { via: 'seed', file: null, actor: user };
  await endRunGuard(tx, { ...runActor, ...(options.prune ? { prune: true } : {}) });
  const webhooks = await applySeedWebhooks(tx, await stagedWebhooks(tx), {
    env: options.env ?? {}, policy: options.webhookPolicy ?? { blockPrivate: options.production === true }, lookup: options.lookup, prune: options.prune === true, actor: runActor,
  });
  if (options.prune) await deleteClientsExcept(tx, [...written]);
  await allowSeedCommit(tx);
  const after = await clientRows(tx, columns);
  // in production a callback set by the run is held to the API's rule: https, but on loopback
  // (the token travels in its query string); one written earlier is left alone
  if (callbacksBefore) {
    for (const [id, callback] of await clientCallbacks(tx)) {
      if (callbacksBefore.get(id) === callback) continue;
      try {
        checkCallbackUrl(callback, { production: true });
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        throw new SeedError(files.map((f) => f.name).join(', '), `callback_url of client ${id}: ${err.message}`);
      }
    }
  }
  const clients = clientChanges(before, after, written, columns);
  const of = (change: ClientChange['change']) => clients.filter((c) => c.change === change).map((c) => c.client_id);
  return {
    files: files.map((f) => f.name), created: of('created'), updated: of('changed'), deleted: of('deleted'),
    unchanged: of('unchanged').length, clients, webhooks,
  };
}

/** Runs one file and refuses what it did beyond the clients table's rows (each check says why). */
async function runFile(tx: Queryable, file: SeedFile, table: ClientsTable, runId: string): Promise<void> {
  const state = await runState(tx);
  const tablesBefore = await tableStates(tx, table.oid);
  const definitions = await schemaDefinitions(tx, table);
  const auditFrom = await auditHighWater(tx, table);
  const idsBefore = await clientIds(tx, table);
  const linksBefore = await linksByClient(tx, table);
  try {
    await tx.exec(file.sql);
  } catch (err) {
    throw new SeedError(file.name, describeDatabaseError(err, file.sql));
  }
  if ((await transactionId(tx)) !== runId) {
    throw new SeedTransactionEndedError(file.name, 'the file ended the run\'s transaction (ROLLBACK or similar): what came before it was undone, '
      + 'but statements after it in this file may have been applied on their own; check the clients table, and remove BEGIN/COMMIT/ROLLBACK from the file');
  }
  // the scan's backstop: triggers left off (a trigger's off switch the scan did not read)
  const off = await clientTriggersOff(tx, table);
  if (off.length > 0) throw new SeedError(file.name, `${off.join(', ')} after the file: ${TRIGGERS_STAY_ON}`);
  // only the clients table is audited, by its triggers: a change elsewhere would not be
  // (src/seeds/table-writes.ts). A seed runs with the service's own rights, as psql would:
  // these checks keep the seed channel to the clients table, they are no sandbox.
  if (!(await countingRows(tx))) throw new SeedError(file.name, `track_counts is off after the file: ${WRITES_COUNTED}`);
  const redefined = changedDefinitions(definitions, await schemaDefinitions(tx, table));
  if (redefined.length > 0) {
    throw new SeedError(file.name, `a seed file may change only the clients table's rows; it changed definitions of the schema: ${redefined.slice(0, 5).join(', ')}`);
  }
  // the links that go with the clients the file deleted (their ON DELETE CASCADE), and no others
  const idsAfter = await clientIds(tx, table);
  const linksOfDeletedClients = [...idsBefore].filter((id) => !idsAfter.has(id)).reduce((n, id) => n + (linksBefore.get(id) ?? 0), 0);
  const triggers = {
    otherAuditRows: await otherAuditRowsSince(tx, table, auditFrom), deliveriesPerNewClient: await registeredSubscribers(tx, table), held: await tablesHeldExclusively(tx),
    linksOfDeletedClients,
  };
  const beyond = writesBeyondClients(tablesBefore, await tableStates(tx, table.oid), table.oid, triggers);
  if (beyond.length > 0) throw new SeedError(file.name, `a seed file may change only the clients table; it ${beyond.join('; ')}`);
  // the audit guard's backstop: the run's own table and no trigger or function of the file's
  const touched = runStateTouched(state, await runState(tx));
  if (touched.length > 0) throw new SeedError(file.name, `a seed file may change only the clients table's rows; it ${touched.join('; ')}`);
}

/** Each client's change between the rows before and after the run (`written`: the clients the files wrote). */
function clientChanges(before: Map<string, ClientRow>, after: Map<string, ClientRow>, written: ReadonlySet<string>, columns: readonly ClientColumn[]): ClientChange[] {
  const shown = (name: string, value: unknown) => (SECRET_CLIENT_COLUMNS.has(name) && value !== null ? 'set' : value);
  const changes: ClientChange[] = [];
  for (const [id, row] of after) {
    const was = before.get(id);
    if (!was) {
      changes.push({ client_id: id, change: 'created', columns: Object.fromEntries(columns.filter((c) => c.name !== 'client_id').map((c) => [c.name, shown(c.name, row[c.name])])) });
      continue;
    }
    const changed = changedColumns(was, row, columns);
    if (changed.length > 0) {
      changes.push({
        client_id: id, change: 'changed',
        columns: Object.fromEntries(changed.map((name) => [name, SECRET_CLIENT_COLUMNS.has(name) ? 'changed' : { from: was[name], to: row[name] }])),
      });
    } else {
      changes.push({ client_id: id, change: written.has(id) ? 'unchanged' : 'not in the files' });
    }
  }
  for (const id of before.keys()) if (!after.has(id)) changes.push({ client_id: id, change: 'deleted' });
  return changes.sort((a, b) => a.client_id.localeCompare(b.client_id));
}

/**
 * The database's message with its detail (which names the offending key or value) and, for
 * errors with a position (syntax), the line of the file.
 */
export function describeDatabaseError(err: unknown, sql: string): string {
  const e = err as { message?: string; detail?: string; position?: string | number };
  let text = e.message ?? String(err);
  if (e.detail) text += ` (${e.detail})`;
  const position = Number(e.position);
  if (Number.isInteger(position) && position > 0) text += ` at line ${sql.slice(0, position - 1).split('\n').length}`;
  return text;
}

const WRITES_COUNTED = 'a seed run reads what each file wrote from the row counts PostgreSQL keeps, which may not be switched off';

const TRIGGERS_STAY_ON = 'the clients table\'s triggers check, audit and announce every change a seed makes, and may not be switched off; '
  + 'remove the lines that switch them off (pg_dump --disable-triggers writes them: dump without it)';

