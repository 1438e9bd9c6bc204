import type { Queryable } from '../db/db.ts';

/** Each client's id and a digest of its documented columns, to tell what a seed run changed. */
export async function clientStates(q: Queryable): Promise<Map<string, string>> {
  const r = await q.query<{ client_id: string; state: string }>(
    `SELECT client_id, md5(row(client_name, callback_url, allowed_ips, active, secret_hash)::text) AS state FROM clients`,
  );
  return new Map(r.rows.map((row) => [row.client_id, row.state]));
}
