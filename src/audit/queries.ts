import type { Queryable } from '../db/db.ts';

/** One audit row as read back. */
export interface AuditRow {
  id: string;
  at: Date;
  action: string;
  outcome: string;
  user_id: number | null;
  username: string | null;
  client_id: string | null;
  ip_address: string | null;
  user_agent: string | null;
  details: Record<string, unknown>;
}

/** What the audit log can be filtered by; every field optional. */
export interface AuditFilter {
  /** A numeric user id, or a (normalized) username. */
  userId?: number;
  username?: string;
  clientId?: string;
  action?: string;
  outcome?: 'success' | 'failure';
  ip?: string;
  from?: Date;
  to?: Date;
}

/**
 * The WHERE clause of a filter, with its parameters. Every value is a bind parameter; the
 * keyset condition (`id < $n` or `id > $n`) is added by the caller.
 */
function whereOf(f: AuditFilter): { clauses: string[]; params: unknown[] } {
  const clauses: string[] = [];
  const params: unknown[] = [];
  const add = (sql: string, value: unknown) => {
    params.push(value);
    clauses.push(sql.replace('?', `$${params.length}`));
  };
  if (f.userId !== undefined) add('user_id = ?', f.userId);
  if (f.username !== undefined) add('username = ?', f.username);
  if (f.clientId !== undefined) add('client_id = ?', f.clientId);
  if (f.action !== undefined) add('action = ?', f.action);
  if (f.outcome !== undefined) add('outcome = ?', f.outcome);
  if (f.ip !== undefined) add('ip_address = ?', f.ip);
  if (f.from !== undefined) add('at >= ?', f.from);
  if (f.to !== undefined) add('at < ?', f.to);
  return { clauses, params };
}

// id as text: bigint; ORDER BY must name audit_log.id, or it would sort this text alias
const COLUMNS = 'id::text AS id, at, action, outcome, user_id, username, client_id, ip_address, user_agent, details';

/**
 * One page of the log, newest first, by keyset on `id`: rows with an id below `before`
 * (the cursor of the previous page). Reads one row more than asked to know whether another
 * page follows, so paging never counts the whole table.
 */
export async function auditPage(q: Queryable, f: AuditFilter, limit: number, before?: bigint): Promise<{ rows: AuditRow[]; nextCursor: string | null }> {
  const { clauses, params } = whereOf(f);
  if (before !== undefined) {
    params.push(before.toString());
    clauses.push(`id < $${params.length}::bigint`);
  }
  params.push(limit + 1);
  const r = await q.query<AuditRow>(
    `SELECT ${COLUMNS} FROM audit_log ${clauses.length ? `WHERE ${clauses.join(' AND ')}` : ''}
     ORDER BY audit_log.id DESC LIMIT $${params.length}`,
    params,
  );
  const rows = r.rows.slice(0, limit).map(parseDetails);
  return { rows, nextCursor: r.rows.length > limit ? rows[rows.length - 1].id : null };
}

/**
 * One batch for the export, oldest first: rows with an id above `after`. The export walks
 * the log batch by batch, so no more than one batch is ever held in memory.
 */
export async function auditBatchAfter(q: Queryable, f: AuditFilter, after: string, size: number): Promise<AuditRow[]> {
  const { clauses, params } = whereOf(f);
  params.push(after);
  clauses.push(`id > $${params.length}::bigint`);
  params.push(size);
  const r = await q.query<AuditRow>(
    `SELECT ${COLUMNS} FROM audit_log WHERE ${clauses.join(' AND ')} ORDER BY audit_log.id LIMIT $${params.length}`,
    params,
  );
  return r.rows.map(parseDetails);
}

/** The distinct action names in the log, for the filter's suggestions. */
export async function auditActions(q: Queryable): Promise<string[]> {
  const r = await q.query<{ action: string }>(
    // a loose index scan: one probe of audit_log_action per distinct name, not a pass over the table
    `WITH RECURSIVE a AS (
       (SELECT action FROM audit_log ORDER BY action LIMIT 1)
       UNION ALL
       SELECT (SELECT action FROM audit_log WHERE action > a.action ORDER BY action LIMIT 1) FROM a WHERE a.action IS NOT NULL
     ) SELECT action FROM a WHERE action IS NOT NULL`,
  );
  return r.rows.map((row) => row.action);
}

function parseDetails(row: AuditRow): AuditRow {
  // PGlite and pg both parse jsonb, but be safe with a driver that hands back text
  return typeof row.details === 'string' ? { ...row, details: JSON.parse(row.details) } : row;
}
