import type { Queryable } from '../db/db.ts';
import { type Bind, statementParams, type WritePart } from '../db/statement.ts';
import type { AuditFilter } from './filter.ts';

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

/**
 * The one INSERT of audit rows: `select` answers the columns action, outcome, user_id,
 * username, client_id, ip_address, user_agent, details, in that order (from values bound
 * here, or from the rows of another part of the same statement).
 */
export function insertAuditRows(select: string): string {
  return `INSERT INTO audit_log (action, outcome, user_id, username, client_id, ip_address, user_agent, details)
       ${select}`;
}

/** The insert of audit rows, in the order given, as a part of a larger statement (null: none). */
export function auditRows(entries: readonly AuditEntry[]): WritePart | null {
  if (entries.length === 0) return null;
  const column = <T>(pick: (e: AuditEntry) => T) => entries.map(pick);
  return {
    sql: (bind: Bind) => insertAuditRows(`SELECT action, outcome, user_id, username, client_id, ip_address, user_agent, details
       FROM unnest(${bind(column((e) => e.action))}::text[], ${bind(column((e) => e.outcome))}::text[], ${bind(column((e) => e.userId ?? null))}::int[],
         ${bind(column((e) => e.username ?? null))}::text[], ${bind(column((e) => e.clientId ?? null))}::text[], ${bind(column((e) => e.ipAddress ?? null))}::text[],
         ${bind(column((e) => e.userAgent?.slice(0, 512) ?? null))}::text[], ${bind(column((e) => JSON.stringify(e.details ?? {})))}::jsonb[])
         WITH ORDINALITY AS e(action, outcome, user_id, username, client_id, ip_address, user_agent, details, n)
       ORDER BY n`),
  };
}

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

/**
 * The WHERE clause of a filter, with its parameters. Every value is a bind parameter; the
 * keyset condition (`id < $n` or `id > $n`) is added by the caller.
 */
function whereOf(f: AuditFilter): { clauses: string[]; params: unknown[]; bind: Bind } {
  const clauses: string[] = [];
  const { bind, values: params } = statementParams();
  const add = (sql: string, value: unknown) => clauses.push(sql.replace('?', bind(value)));
  if (f.userId !== undefined && f.username !== undefined) {
    clauses.push(`(user_id = ${bind(f.userId)} OR username = ${bind(f.username)})`);
  } else if (f.userId !== undefined) {
    add('user_id = ?', f.userId);
  } else if (f.username !== undefined) {
    add('username = ?', f.username);
  }
  if (f.clientId !== undefined) add('client_id = ?', f.clientId);
  if (f.action !== undefined) add('action = ?', f.action);
  if (f.outcome !== undefined) add('outcome = ?', f.outcome);
  if (f.ip !== undefined) add('ip_address = ?', f.ip);
  if (f.from !== undefined) add('at >= ?', f.from);
  if (f.to !== undefined) add('at < ?', f.to);
  return { clauses, params, bind };
}

// id as text: bigint; ORDER BY must name audit_log.id, or it would sort this text alias
const COLUMNS = 'id::text AS id, at, action, outcome, user_id, username, client_id, ip_address, user_agent, details';

/**
 * One page of the log, newest first, by keyset on `id`: rows with an id below `before`
 * (the cursor of the previous page). Reads one row more than asked to know whether another
 * page follows, so paging never counts the whole table.
 */
export async function auditPage(q: Queryable, f: AuditFilter, limit: number, before?: bigint): Promise<{ rows: AuditRow[]; nextCursor: string | null }> {
  const { clauses, params, bind } = whereOf(f);
  if (before !== undefined) clauses.push(`id < ${bind(before.toString())}::bigint`);
  const r = await q.query<AuditRow>(
    `SELECT ${COLUMNS} FROM audit_log ${clauses.length ? `WHERE ${clauses.join(' AND ')}` : ''}
     ORDER BY audit_log.id DESC LIMIT ${bind(limit + 1)}`,
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
  const { clauses, params, bind } = whereOf(f);
  clauses.push(`id > ${bind(after)}::bigint`);
  const r = await q.query<AuditRow>(
    `SELECT ${COLUMNS} FROM audit_log WHERE ${clauses.join(' AND ')} ORDER BY audit_log.id LIMIT ${bind(size)}`,
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

/**
 * Makes the transaction `tx` (before its first query) read one snapshot, read-only, and
 * wait up to `idleMinutes` between its statements: an export's batches, written to a
 * receiver that may read slowly (PostgreSQL only).
 */
export async function useExportSnapshot(tx: Queryable, idleMinutes: number): Promise<void> {
  await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
  await tx.query(`SET LOCAL idle_in_transaction_session_timeout = '${Math.trunc(idleMinutes)}min'`);
}
