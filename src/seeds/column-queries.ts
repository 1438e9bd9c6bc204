import type { Queryable } from '../db/db.ts';
import { type ClientColumn, type ClientRow, DERIVED_CLIENT_COLUMNS } from './columns.ts';

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

/** Every client's documented columns, by client id (read as to_jsonb, so every column type has one form). */
export async function clientRows(q: Queryable, columns: readonly ClientColumn[]): Promise<Map<string, ClientRow>> {
  const r = await q.query<{ row: ClientRow }>('SELECT to_jsonb(c) AS row FROM clients c ORDER BY c.client_id');
  return new Map(r.rows.map(({ row }) => [String(row.client_id), Object.fromEntries(columns.map((c) => [c.name, row[c.name] ?? null]))]));
}

