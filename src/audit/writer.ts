import type { Queryable } from '../db/db.ts';
import { placeholders, type WritePart, writeTogether } from '../db/statement.ts';

/** One audit record. Never put passwords, secrets or whole tokens in `details`. */
export interface AuditEntry {
  action: string;
  outcome: 'success' | 'failure';
  userId?: number | null;
  username?: string | null;
  clientId?: string | null;
  ipAddress?: string | null;
  userAgent?: string | null;
  details?: Record<string, unknown>;
}

/** Appends one row to the audit log (inside the caller's transaction when given one). */
export async function writeAudit(q: Queryable, e: AuditEntry): Promise<void> {
  await writeTogether(q, [auditRows([e])]);
}

/** The insert of audit rows, in the order given, as a part of a larger statement (null: none). */
export function auditRows(entries: readonly AuditEntry[]): WritePart | null {
  if (entries.length === 0) return null;
  const column = <T>(pick: (e: AuditEntry) => T) => entries.map(pick);
  return {
    sql: (first) => {
      const [action, outcome, userId, username, clientId, ip, agent, details] = placeholders(first, 8);
      return `INSERT INTO audit_log (action, outcome, user_id, username, client_id, ip_address, user_agent, details)
       SELECT action, outcome, user_id, username, client_id, ip_address, user_agent, details
       FROM unnest(${action}::text[], ${outcome}::text[], ${userId}::int[], ${username}::text[], ${clientId}::text[], ${ip}::text[], ${agent}::text[], ${details}::jsonb[])
         WITH ORDINALITY AS e(action, outcome, user_id, username, client_id, ip_address, user_agent, details, n)
       ORDER BY n`;
    },
    values: [
      column((e) => e.action),
      column((e) => e.outcome),
      column((e) => e.userId ?? null),
      column((e) => e.username ?? null),
      column((e) => e.clientId ?? null),
      column((e) => e.ipAddress ?? null),
      column((e) => e.userAgent?.slice(0, 512) ?? null),
      column((e) => JSON.stringify(e.details ?? {})),
    ],
  };
}
