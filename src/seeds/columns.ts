/**
 * The clients table's documented interface, read from the catalog: every column of the table
 * but those the service derives itself (read by src/seeds/column-queries.ts). Plan, check and
 * export (src/seeds/apply.ts, src/seeds/export.ts) and the run's counts all use this one list, so a column
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

/** A client row as JSON values (to_jsonb), by column name. */
export type ClientRow = Record<string, unknown>;

/** The columns whose values differ between two rows of the same client. */
export function changedColumns(before: ClientRow, after: ClientRow, columns: readonly ClientColumn[]): string[] {
  return columns.map((c) => c.name).filter((name) => JSON.stringify(before[name] ?? null) !== JSON.stringify(after[name] ?? null));
}
