import type { Db } from '../db/db.ts';
import { setChangeActor } from '../clients/queries.ts';
import { checkCallbackUrl } from '../clients/service.ts';
import { AppError } from '../http/errors.ts';
import { changedDefinitions, writesBeyondClients } from './table-writes.ts';
import {
  allowSeedCommit, clientCallbacks, clientStates, clientsTable, clientTriggersOff, guardSeedCommit, lockSeedRuns, restoreSessionSettings, sessionSettings, tableStates, transactionId,
  auditHighWater, clientIds, countingRows, linksByClient, otherAuditRowsSince, registeredSubscribers, schemaDefinitions, tablesHeldExclusively,
} from './queries.ts';

/** One seed file: the name it is reported by and its SQL. */
export interface SeedFile {
  name: string;
  sql: string;
}

/** What a seed run changed, by client id. */
export interface SeedResult {
  files: string[];
  created: string[];
  updated: string[];
  deleted: string[];
  unchanged: number;
}

/** A seed file the database refused (or that cannot run in one transaction); nothing was applied. */
export class SeedError extends Error {
  constructor(readonly file: string, message: string) {
    super(`${file}: ${message}`);
  }
}

/**
 * A seed file ended the run's transaction (a ROLLBACK the scan did not see): the run stopped
 * there, but what the file did after it may have been committed, so "nothing was applied"
 * cannot be said.
 */
export class SeedTransactionEndedError extends SeedError {}

/**
 * Applies seed files in the order given, all in one transaction: when any statement of any
 * file fails, nothing of the run stays. The database checks every client row and audits and
 * announces each change itself (migrations/0002_clients_as_sql.sql); here each file is named
 * as the actor, so the audit log says which file made a change.
 */
export async function applySeeds(db: Db, files: readonly SeedFile[], actor: { user?: string } = {}, options: { production?: boolean } = {}): Promise<SeedResult> {
  for (const file of files) {
    const control = transactionControl(file.sql);
    if (control) {
      throw new SeedError(file.name, `"${control}": a seed run is one transaction of its own; remove BEGIN/COMMIT/ROLLBACK from the file`);
    }
    const off = triggerSwitch(file.sql);
    if (off) throw new SeedError(file.name, `"${off}": ${TRIGGERS_STAY_ON}`);
    if (/\btrack_counts\b/i.test(file.sql)) throw new SeedError(file.name, `"track_counts": ${WRITES_COUNTED}`);
  }
  return db.transaction(async (tx) => {
    // A COMMIT the scan missed fails (see guardSeedCommit); a ROLLBACK cannot be made to fail,
    // but it shows: the statements after it run in a transaction of their own, with another id.
    await guardSeedCommit(tx);
    await lockSeedRuns(tx);
    const run = await transactionId(tx);
    const before = await clientStates(tx);
    const callbacksBefore = options.production ? await clientCallbacks(tx) : undefined; // only production holds callbacks to https
    const session = await sessionSettings(tx);
    const table = await clientsTable(tx);
    for (const file of files) {
      await setChangeActor(tx, { via: 'seed', file: file.name, actor: actor.user ?? null });
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
      if ((await transactionId(tx)) !== run) {
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
    }
    // what a file SET for its session ends with the run (the service's own session on the embedded database)
    await restoreSessionSettings(tx, session);
    await allowSeedCommit(tx);
    const after = await clientStates(tx);
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
    const created = [...after.keys()].filter((id) => !before.has(id));
    const updated = [...after.keys()].filter((id) => before.has(id) && before.get(id)!.state !== after.get(id)!.state);
    const deleted = [...before.keys()].filter((id) => !after.has(id));
    // unchanged: written back by a file as it was (an upsert re-applied), not merely in the table
    const unchanged = [...after.keys()].filter((id) => before.has(id) && before.get(id)!.state === after.get(id)!.state && before.get(id)!.version !== after.get(id)!.version);
    return { files: files.map((f) => f.name), created, updated, deleted, unchanged: unchanged.length };
  });
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

/**
 * The first statement that would keep the clients table's triggers from firing: ALTER TABLE
 * ... DISABLE TRIGGER (pg_dump's --disable-triggers wraps its rows in it), or setting
 * session_replication_role (pg_restore's way). Read as transactionControl reads a file: the
 * friendly refusal before anything runs; applySeeds checks the triggers after each file too.
 */
export function triggerSwitch(sql: string): string | null {
  for (const statement of codeOf(sql).split(';')) {
    if (/\bdisable\s+trigger\b|\bsession_replication_role\b/i.test(statement)) return statement.trim().replace(/\s+/g, ' ').slice(0, 80);
  }
  // the setting's name in a string too: set_config('session_replication_role', 'replica', false)
  return /\bsession_replication_role\b/i.test(sql) ? 'session_replication_role' : null;
}

/**
 * The first statement that would end or nest the run's transaction (BEGIN, COMMIT, ...),
 * outside comments, quoted text and dollar-quoted bodies (a DO block's BEGIN ... END is fine).
 * A friendly refusal before anything runs; applySeeds does not rely on it alone.
 */
export function transactionControl(sql: string): string | null {
  for (const statement of codeOf(sql).split(';')) {
    const m = /^\s*(begin|commit|rollback|end|abort|start\s+transaction|savepoint|release|prepare\s+transaction)\b/i.exec(statement);
    if (m) return m[1].replace(/\s+/g, ' ').toUpperCase();
  }
  return null;
}

// PostgreSQL's lexer (scan.l): identifiers may hold digits and $ after the first character,
// and every byte above 0x7F counts as a letter
const IDENT_START = /[A-Za-z_\u0080-\uffff]/;
const IDENT_CONT = /[A-Za-z0-9_$\u0080-\uffff]/;
const DOLLAR_TAG = /\$(?:[A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/y;

/**
 * `sql` with comments, quoted text, quoted identifiers and dollar-quoted bodies blanked, read
 * as PostgreSQL reads them: a whole identifier is one token, so `E'...'` (an escape string,
 * where \' does not end it) is one only when the E stands alone, and `x$$` is a name, not the
 * start of a dollar quote; block comments nest. U&'...', B'...', N'...' end like plain strings.
 */
function codeOf(sql: string): string {
  let code = '';
  let i = 0;
  while (i < sql.length) {
    const c = sql[i];
    if (IDENT_START.test(c)) {
      let end = i + 1;
      while (end < sql.length && IDENT_CONT.test(sql[end])) end += 1;
      const escapeString = end === i + 1 && (c === 'E' || c === 'e') && sql[end] === "'";
      code += sql.slice(i, end) + (escapeString ? ' ' : '');
      i = escapeString ? quotedEnd(sql, end + 1, "'", true) : end;
      continue;
    }
    DOLLAR_TAG.lastIndex = i;
    const tag = c === '$' ? DOLLAR_TAG.exec(sql)?.[0] : undefined;
    let end: number | undefined;
    if (tag) {
      const close = sql.indexOf(tag, i + tag.length);
      end = close < 0 ? sql.length : close + tag.length;
    } else if (c === "'" || c === '"') {
      end = quotedEnd(sql, i + 1, c, false);
    } else if (sql.startsWith('--', i)) {
      const newline = sql.indexOf('\n', i);
      end = newline < 0 ? sql.length : newline;
    } else if (sql.startsWith('/*', i)) {
      end = blockCommentEnd(sql, i);
    }
    code += end === undefined ? c : ' ';
    i = end ?? i + 1;
  }
  return code;
}

/** Where text quoted by `quote` that starts at `from` ends: a doubled quote is one; with `backslash`, \x is one character. */
function quotedEnd(sql: string, from: number, quote: string, backslash: boolean): number {
  let i = from;
  while (i < sql.length) {
    if (backslash && sql[i] === '\\') i += 2;
    else if (sql[i] !== quote) i += 1;
    else if (sql[i + 1] === quote) i += 2;
    else return i + 1;
  }
  return sql.length;
}

/** Where the block comment opening at `from` ends, counting the comments nested in it. */
function blockCommentEnd(sql: string, from: number): number {
  let depth = 0;
  let i = from;
  while (i < sql.length) {
    if (sql.startsWith('/*', i)) {
      depth += 1;
      i += 2;
    } else if (sql.startsWith('*/', i)) {
      depth -= 1;
      i += 2;
      if (depth === 0) return i;
    } else {
      i += 1;
    }
  }
  return sql.length;
}
