import { createWriteBatch } from '../db/batch.ts';
import type { Queryable } from '../db/db.ts';
import { writeTogether } from '../db/statement.ts';
import { type AuditEntry, auditRows } from './queries.ts';

export type { AuditEntry };
export { auditRows };

/** Appends one row to the audit log (inside the caller's transaction when given one). */
export async function writeAudit(q: Queryable, e: AuditEntry): Promise<void> {
  await writeTogether(q, [auditRows([e])]);
}

/**
 * Appends audit rows outside any transaction, the rows of requests that arrive together in one
 * statement (src/db/batch.ts): for the entries of busy endpoints that are written on their own,
 * after the answer is decided (the OpenID Connect token endpoints). Resolves once its row is
 * committed; a row the database refuses fails alone.
 */
export function createAuditBatch(q: Queryable): (entry: AuditEntry) => Promise<void> {
  return createWriteBatch<AuditEntry>(async (entries) => {
    await writeTogether(q, [auditRows(entries)]);
  });
}
