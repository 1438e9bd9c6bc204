import type { Queryable } from '../db/db.ts';
import { writeTogether } from '../db/statement.ts';
import { type AuditEntry, auditRows } from './queries.ts';

export type { AuditEntry };
export { auditRows };

/** Appends one row to the audit log (inside the caller's transaction when given one). */
export async function writeAudit(q: Queryable, e: AuditEntry): Promise<void> {
  await writeTogether(q, [auditRows([e])]);
}
