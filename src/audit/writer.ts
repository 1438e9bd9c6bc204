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
  await writeAuditMany(q, [e]);
}

/** Appends rows to the audit log in one statement, in the order given. */
export async function writeAuditMany(q: Queryable, entries: readonly AuditEntry[]): Promise<void> {
  if (entries.length === 0) return;
  const column = <T>(pick: (e: AuditEntry) => T) => entries.map(pick);
  await q.query(
    `INSERT INTO audit_log (action, outcome, user_id, username, client_id, ip_address, user_agent, details)
     SELECT action, outcome, user_id, username, client_id, ip_address, user_agent, details
     FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::text[], $8::jsonb[])
       WITH ORDINALITY AS e(action, outcome, user_id, username, client_id, ip_address, user_agent, details, n)
     ORDER BY n`,
    [
      column((e) => e.action),
      column((e) => e.outcome),
      column((e) => e.userId ?? null),
      column((e) => e.username ?? null),
      column((e) => e.clientId ?? null),
      column((e) => e.ipAddress ?? null),
      column((e) => e.userAgent?.slice(0, 512) ?? null),
      column((e) => JSON.stringify(e.details ?? {})),
    ],
  );
}
