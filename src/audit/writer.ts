import type { Queryable } from '../db/db.ts';

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
  await q.query(
    `INSERT INTO audit_log (action, outcome, user_id, username, client_id, ip_address, user_agent, details)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [e.action, e.outcome, e.userId ?? null, e.username ?? null, e.clientId ?? null, e.ipAddress ?? null,
      e.userAgent?.slice(0, 512) ?? null, JSON.stringify(e.details ?? {})],
  );
}
