import type { Db } from '../db/db.ts';
import { setChangeActor } from '../clients/queries.ts';
import { clientStates } from './queries.ts';

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
 * Applies seed files in the order given, all in one transaction: when any statement of any
 * file fails, nothing of the run stays. The database checks every client row and audits and
 * announces each change itself (migrations/0002_clients_as_sql.sql); here each file is named
 * as the actor, so the audit log says which file made a change.
 */
export async function applySeeds(db: Db, files: readonly SeedFile[], actor: { user?: string } = {}): Promise<SeedResult> {
  for (const file of files) {
    const control = transactionControl(file.sql);
    if (control) {
      throw new SeedError(file.name, `"${control}": a seed run is one transaction of its own; remove BEGIN/COMMIT/ROLLBACK from the file`);
    }
  }
  return db.transaction(async (tx) => {
    const before = await clientStates(tx);
    for (const file of files) {
      await setChangeActor(tx, { via: 'seed', file: file.name, actor: actor.user ?? null });
      try {
        await tx.exec(file.sql);
      } catch (err) {
        throw new SeedError(file.name, describeDatabaseError(err, file.sql));
      }
    }
    const after = await clientStates(tx);
    const created = [...after.keys()].filter((id) => !before.has(id));
    const updated = [...after.keys()].filter((id) => before.has(id) && before.get(id) !== after.get(id));
    const deleted = [...before.keys()].filter((id) => !after.has(id));
    return { files: files.map((f) => f.name), created, updated, deleted, unchanged: after.size - created.length - updated.length };
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

/**
 * The first statement that would end or nest the run's transaction (BEGIN, COMMIT, ...),
 * outside comments, quoted text and dollar-quoted bodies (a DO block's BEGIN ... END is fine).
 */
export function transactionControl(sql: string): string | null {
  // one pass, leftmost first, so a quote inside a comment (or the reverse) is skipped whole
  const code = sql.replace(/\$([A-Za-z_][A-Za-z0-9_]*)?\$[\s\S]*?\$\1\$|'(?:[^']|'')*'|"(?:[^"]|"")*"|--[^\n]*|\/\*[\s\S]*?\*\//g, ' ');
  for (const statement of code.split(';')) {
    const m = /^\s*(begin|commit|rollback|end|abort|start\s+transaction|savepoint|release|prepare\s+transaction)\b/i.exec(statement);
    if (m) return m[1].replace(/\s+/g, ' ').toUpperCase();
  }
  return null;
}
