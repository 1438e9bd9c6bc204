import type { Queryable } from '../db/db.ts';

/** A client system as stored (the secret only as hash and last four characters). */
export interface ClientRecord {
  client_id: string;
  client_name: string;
  secret_hash: string;
  secret_last4: string;
  callback_url: string;
  allowed_ips: string[];
  active: boolean;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = 'client_id, client_name, secret_hash, secret_last4, callback_url, allowed_ips, active, created_at, updated_at';

export async function findClient(q: Queryable, clientId: string): Promise<ClientRecord | null> {
  const r = await q.query<ClientRecord>(`SELECT ${COLUMNS} FROM clients WHERE client_id = $1`, [clientId]);
  return r.rows[0] ?? null;
}

/** The clients with these ids that exist, in no particular order. */
export async function findClients(q: Queryable, clientIds: readonly string[]): Promise<ClientRecord[]> {
  return (await q.query<ClientRecord>(`SELECT ${COLUMNS} FROM clients WHERE client_id = ANY ($1::text[])`, [clientIds], { prepare: true })).rows;
}

export async function listClients(q: Queryable): Promise<ClientRecord[]> {
  return (await q.query<ClientRecord>(`SELECT ${COLUMNS} FROM clients ORDER BY created_at, client_id`)).rows;
}

export async function insertClient(
  q: Queryable,
  c: { clientId: string; clientName: string; secretHash: string; secretLast4: string; callbackUrl: string; allowedIps: string[] },
): Promise<ClientRecord> {
  const r = await q.query<ClientRecord>(
    `INSERT INTO clients (client_id, client_name, secret_hash, secret_last4, callback_url, allowed_ips)
     VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${COLUMNS}`,
    [c.clientId, c.clientName, c.secretHash, c.secretLast4, c.callbackUrl, c.allowedIps],
  );
  return r.rows[0];
}

export async function updateClientSecret(q: Queryable, clientId: string, secretHash: string, secretLast4: string): Promise<ClientRecord | null> {
  const r = await q.query<ClientRecord>(
    `UPDATE clients SET secret_hash = $2, secret_last4 = $3, updated_at = now() WHERE client_id = $1 RETURNING ${COLUMNS}`,
    [clientId, secretHash, secretLast4],
  );
  return r.rows[0] ?? null;
}

/** Changes the given fields of a client; unknown client: null. */
export async function updateClient(
  q: Queryable,
  clientId: string,
  patch: { clientName?: string; callbackUrl?: string; allowedIps?: string[]; active?: boolean },
): Promise<ClientRecord | null> {
  const r = await q.query<ClientRecord>(
    `UPDATE clients SET
       client_name = COALESCE($2, client_name),
       callback_url = COALESCE($3, callback_url),
       allowed_ips = COALESCE($4::text[], allowed_ips),
       active = COALESCE($5, active),
       updated_at = now()
     WHERE client_id = $1 RETURNING ${COLUMNS}`,
    [clientId, patch.clientName ?? null, patch.callbackUrl ?? null, patch.allowedIps ?? null, patch.active ?? null],
  );
  return r.rows[0] ?? null;
}

/**
 * Names who makes the client changes of this transaction, for the audit entries the
 * database writes itself (migrations/0002_clients_as_sql.sql: a write without it is audited
 * as plain SQL). Transaction-local: must run inside the transaction that writes.
 */
export async function setChangeActor(q: Queryable, actor: Record<string, unknown>): Promise<void> {
  await q.query(`SELECT set_config('auth.actor', $1, true)`, [JSON.stringify(actor)]);
}
