import { once } from 'node:events';
import type { Writable } from 'node:stream';
import type { Db, Queryable } from '../db/db.ts';
import { auditBatchAfter, type AuditRow, useExportSnapshot } from './queries.ts';
import type { AuditFilter } from './filter.ts';

/** An audit row as the API and the exports show it: the row with a numeric id and an ISO time. */
export type PublicAuditEntry = Omit<AuditRow, 'id' | 'at'> & { id: number; at: string };

export function toPublicAudit(row: AuditRow): PublicAuditEntry {
  return {
    id: Number(row.id),
    at: new Date(row.at).toISOString(),
    action: row.action,
    outcome: row.outcome,
    user_id: row.user_id,
    username: row.username,
    client_id: row.client_id,
    ip_address: row.ip_address,
    user_agent: row.user_agent,
    details: row.details ?? {},
  };
}

export const CSV_COLUMNS = ['id', 'at', 'action', 'outcome', 'user_id', 'username', 'client_id', 'ip_address', 'user_agent', 'details'] as const;

/**
 * One CSV cell (RFC 4180), always quoted: a spreadsheet whose list separator is another
 * character (`;` in many locales) splits an unquoted cell there, and the part after it could
 * start a formula. A cell a spreadsheet would read as a formula (starting with = + - @, or a
 * tab or carriage return that some programs skip before one) is prefixed with a single quote,
 * so an attacker-chosen username or user agent cannot run as a formula when an administrator
 * opens the export (OWASP "CSV injection"). An empty value is an empty, unquoted cell.
 */
export function csvCell(value: unknown): string {
  if (value === null || value === undefined) return '';
  let text = typeof value === 'object' ? JSON.stringify(value) : String(value);
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return `"${text.replace(/"/g, '""')}"`;
}

/** One CSV line (CRLF-terminated) of an entry. */
export function csvLine(entry: PublicAuditEntry): string {
  return `${CSV_COLUMNS.map((c) => csvCell(entry[c])).join(',')}\r\n`;
}

export type ExportFormat = 'csv' | 'ndjson';

/**
 * Streams every entry matching `filter` to `out`, oldest first, as CSV (with a header line)
 * or NDJSON: the log as it was when the export began. The log is read in batches by keyset
 * on id; each batch is written and, when the socket's buffer is full, the next query waits
 * for 'drain'. So memory holds one batch, whatever the size of the log. Stops early when the
 * receiver goes away. Returns the number of entries written.
 *
 * On PostgreSQL the batches share one snapshot (a read-only REPEATABLE READ transaction): an
 * audit row is written in the transaction of the change it records, so rows commit out of id
 * order, and batches read at different moments would skip a row that committed between them
 * below an id already written. The embedded database runs one transaction at a time, so its
 * rows commit in id order; there a transaction held for the export would hold every request.
 */
export async function streamAudit(
  db: Db,
  filter: AuditFilter,
  format: ExportFormat,
  out: Writable,
  options: { batchSize?: number } = {},
): Promise<number> {
  if (db.kind === 'embedded') return streamBatches(db, filter, format, out, options.batchSize ?? 1000);
  return db.transaction(async (tx) => {
    await useExportSnapshot(tx, EXPORT_IDLE_MINUTES);
    return streamBatches(tx, filter, format, out, options.batchSize ?? 1000);
  });
}

/** The rows of an export's first batch (the audit page's own size). */
export const FIRST_BATCH = 50;

/** How long an export may wait for its receiver to take the next batch. */
const EXPORT_IDLE_MINUTES = 2;

async function streamBatches(q: Queryable, filter: AuditFilter, format: ExportFormat, out: Writable, batchSize: number): Promise<number> {
  let gone = false;
  const onClose = () => { gone = true; };
  out.once('close', onClose);
  try {
    if (format === 'csv' && !(await write(out, `${CSV_COLUMNS.join(',')}\r\n`))) return 0;
    let after = '0';
    let count = 0;
    // the first batch is a page's worth: the download starts as soon as a page would show
    // (a filter whose rows are spread over the table reads a heap page per row); then the
    // batches grow four times at each step to full size, so a receiver that goes away early
    // (a glance at the first lines) leaves little read for no one
    let size = Math.min(FIRST_BATCH, batchSize);
    while (!gone) {
      const rows = await auditBatchAfter(q, filter, after, size);
      // a receiver that went away while the batch was read: its rows are not formatted for no one
      if (gone || rows.length === 0) break;
      let chunk = '';
      for (const row of rows) {
        const entry = toPublicAudit(row);
        chunk += format === 'csv' ? csvLine(entry) : `${JSON.stringify(entry)}\n`;
      }
      count += rows.length;
      after = rows[rows.length - 1].id;
      if (!(await write(out, chunk))) break;
      if (rows.length < size) break;
      size = Math.min(size * 4, batchSize);
    }
    return count;
  } finally {
    out.off('close', onClose);
  }
}

/** Writes a chunk; waits for 'drain' when the buffer is full. False when the stream closed first. */
async function write(out: Writable, chunk: string): Promise<boolean> {
  if (out.destroyed || out.writableEnded) return false;
  if (out.write(chunk)) return true;
  const ac = new AbortController();
  try {
    const winner = await Promise.race([
      once(out, 'drain', { signal: ac.signal }).then(() => 'drain'),
      once(out, 'close', { signal: ac.signal }).then(() => 'close'),
    ]);
    return winner === 'drain';
  } finally {
    ac.abort();
  }
}
