import type { Queryable } from '../db/db.ts';

/**
 * The clients table's documented interface, read from the catalog: every column of the table
 * but those the service derives itself. Plan, check and export (src/seeds/plan.ts,
 * src/seeds/export.ts) and the run's created/updated counts all use this one list, so a column
 * added to clients by a migration is planned, checked and exported with no change here; a new
 * column the service derives (never written by a seed) is one more name in
 * DERIVED_CLIENT_COLUMNS, a new column holding a secret's hash one more in SECRET_CLIENT_COLUMNS.
 */

/** Columns the service derives (the triggers set them): never compared, never exported. Generated and identity columns are left out too. */
export const DERIVED_CLIENT_COLUMNS: ReadonlySet<string> = new Set(['secret_last4', 'created_at', 'updated_at']);

/** Columns holding a secret's hash: a plan or a check says "changed", never the value (an export writes the hash). */
export const SECRET_CLIENT_COLUMNS: ReadonlySet<string> = new Set(['secret_hash', 'previous_secret_hash']);

/** One documented column: its name and its SQL type (format_type). */
export interface ClientColumn {
  name: string;
  type: string;
}

/** The documented columns of clients, in table order (client_id first). */
export async function clientColumns(q: Queryable): Promise<ClientColumn[]> {
  const r = await q.query<ClientColumn>(
    `SELECT a.attname AS name, pg_catalog.format_type(a.atttypid, a.atttypmod) AS type
       FROM pg_catalog.pg_attribute a
      WHERE a.attrelid = 'clients'::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' AND a.attidentity = ''
      ORDER BY a.attnum`,
  );
  const columns = r.rows.filter((c) => !DERIVED_CLIENT_COLUMNS.has(c.name));
  return [...columns.filter((c) => c.name === 'client_id'), ...columns.filter((c) => c.name !== 'client_id')];
}

/** A client row as JSON values (to_jsonb), by column name. */
export type ClientRow = Record<string, unknown>;

/** Every client's documented columns, by client id (read as to_jsonb, so every column type has one form). */
export async function clientRows(q: Queryable, columns: readonly ClientColumn[]): Promise<Map<string, ClientRow>> {
  const r = await q.query<{ row: ClientRow }>('SELECT to_jsonb(c) AS row FROM clients c ORDER BY c.client_id');
  return new Map(r.rows.map(({ row }) => [String(row.client_id), Object.fromEntries(columns.map((c) => [c.name, row[c.name] ?? null]))]));
}

/** The columns whose values differ between two rows of the same client. */
export function changedColumns(before: ClientRow, after: ClientRow, columns: readonly ClientColumn[]): string[] {
  return columns.map((c) => c.name).filter((name) => JSON.stringify(before[name] ?? null) !== JSON.stringify(after[name] ?? null));
}
