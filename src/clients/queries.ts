import type { Queryable } from '../db/db.ts';
import type { ClientRecord } from './client.ts';

/**
 * Every column of a ClientRecord, and the row's version (xmin: a new one with every write
 * to the row, whoever makes it). The previous secret is read only while its grace lasts,
 * decided by the database's clock in the very statement that reads it, so every instance
 * stops accepting it at the same moment whatever its own clock says.
 */
const COLUMNS = `client_id, client_name, secret_hash, secret_last4, callback_url, initiate_login_uri, allowed_ips, logo_url, active,
  redirect_uris, post_logout_redirect_uris, public, backchannel_logout_uri, created_at, updated_at, xmin::text AS version,
  allow_groups, allow_roles, listed,
  CASE WHEN previous_secret_expires_at > now() THEN previous_secret_hash END AS previous_secret_hash,
  CASE WHEN previous_secret_expires_at > now() THEN previous_secret_expires_at END AS previous_secret_expires_at`;

/** The OpenID Connect fields of a client (migrations/0024); `backchannelLogoutUri: null` removes it. */
export interface OidcFields {
  redirectUris?: string[];
  postLogoutRedirectUris?: string[];
  public?: boolean;
  backchannelLogoutUri?: string | null;
}

/**
 * The client with this id, or null. With `lock`, its row is held against other writers until
 * the transaction ends: FOR NO KEY UPDATE, the lock an UPDATE takes, so the tokens being
 * issued for the client (whose rows refer to it) are not held up by it, as with a user's row
 * (lockUserRow in src/auth/password-queries.ts).
 */
export async function findClient(q: Queryable, clientId: string, options: { lock?: boolean } = {}): Promise<ClientRecord | null> {
  const r = await q.query<ClientRecord>(`SELECT ${COLUMNS} FROM clients WHERE client_id = $1${options.lock ? ' FOR NO KEY UPDATE' : ''}`, [clientId]);
  return r.rows[0] ?? null;
}

/** The clients with these ids that exist, in no particular order. */
export async function findClients(q: Queryable, clientIds: readonly string[]): Promise<ClientRecord[]> {
  return (await q.query<ClientRecord>(`SELECT ${COLUMNS} FROM clients WHERE client_id = ANY ($1::text[])`, [clientIds], { prepare: true })).rows;
}

export async function listClients(q: Queryable): Promise<ClientRecord[]> {
  return (await q.query<ClientRecord>(`SELECT ${COLUMNS} FROM clients ORDER BY created_at, client_id`)).rows;
}

/** A client's access rule and listing, as written (undefined: unchanged; docs/access.md). */
export interface AccessPatch {
  allowGroups?: string[];
  allowRoles?: string[];
  listed?: boolean;
}

export async function insertClient(
  q: Queryable,
  c: {
    clientId: string; clientName: string; secretHash: string; secretLast4: string; callbackUrl: string; allowedIps: string[]; logoUrl?: string | null;
    initiateLoginUri?: string | null;
  } & OidcFields & AccessPatch,
): Promise<ClientRecord> {
  const r = await q.query<ClientRecord>(
    `INSERT INTO clients (client_id, client_name, secret_hash, secret_last4, callback_url, allowed_ips, logo_url, initiate_login_uri,
       redirect_uris, post_logout_redirect_uris, public, backchannel_logout_uri, allow_groups, allow_roles, listed)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, COALESCE($13::text[], '{}'), COALESCE($14::text[], '{}'), COALESCE($15::boolean, true))
     RETURNING ${COLUMNS}`,
    [c.clientId, c.clientName, c.secretHash, c.secretLast4, c.callbackUrl, c.allowedIps, c.logoUrl ?? null, c.initiateLoginUri ?? null,
      c.redirectUris ?? [], c.postLogoutRedirectUris ?? [], c.public ?? false, c.backchannelLogoutUri ?? null,
      c.allowGroups ?? null, c.allowRoles ?? null, c.listed ?? null],
  );
  return r.rows[0];
}

/**
 * Replaces a client's secret. With `graceSeconds` > 0 the replaced secret (its hash) stays
 * valid that long after now, by the database clock; with 0 it fails at once, and any
 * earlier previous secret is forgotten either way (at most one previous secret is kept).
 */
export async function updateClientSecret(
  q: Queryable,
  clientId: string,
  secret: { hash: string; last4: string; graceSeconds: number },
): Promise<ClientRecord | null> {
  const r = await q.query<ClientRecord>(
    `UPDATE clients SET
       previous_secret_hash = CASE WHEN $4::int > 0 THEN secret_hash END,
       previous_secret_expires_at = CASE WHEN $4::int > 0 THEN now() + make_interval(secs => $4::int) END,
       secret_hash = $2, secret_last4 = $3, updated_at = now()
     WHERE client_id = $1 RETURNING ${COLUMNS}`,
    [clientId, secret.hash, secret.last4, secret.graceSeconds],
  );
  return r.rows[0] ?? null;
}

/** Changes the given fields of a client (`logoUrl: null` removes the logo, `initiateLoginUri: null` the initiate-login URL); unknown client: null. */
export async function updateClient(
  q: Queryable,
  clientId: string,
  patch: { clientName?: string; callbackUrl?: string; allowedIps?: string[]; active?: boolean; logoUrl?: string | null; initiateLoginUri?: string | null } & OidcFields & AccessPatch,
): Promise<ClientRecord | null> {
  const r = await q.query<ClientRecord>(
    `UPDATE clients SET
       client_name = COALESCE($2, client_name),
       callback_url = COALESCE($3, callback_url),
       allowed_ips = COALESCE($4::text[], allowed_ips),
       active = COALESCE($5, active),
       logo_url = CASE WHEN $6::boolean THEN $7::text ELSE logo_url END,
       initiate_login_uri = CASE WHEN $8::boolean THEN $9::text ELSE initiate_login_uri END,
       redirect_uris = COALESCE($10::text[], redirect_uris),
       post_logout_redirect_uris = COALESCE($11::text[], post_logout_redirect_uris),
       public = COALESCE($12::boolean, public),
       backchannel_logout_uri = CASE WHEN $13::boolean THEN $14::text ELSE backchannel_logout_uri END,
       allow_groups = COALESCE($15::text[], allow_groups),
       allow_roles = COALESCE($16::text[], allow_roles),
       listed = COALESCE($17::boolean, listed),
       updated_at = now()
     WHERE client_id = $1 RETURNING ${COLUMNS}`,
    [clientId, patch.clientName ?? null, patch.callbackUrl ?? null, patch.allowedIps ?? null, patch.active ?? null,
      patch.logoUrl !== undefined, patch.logoUrl ?? null, patch.initiateLoginUri !== undefined, patch.initiateLoginUri ?? null,
      patch.redirectUris ?? null, patch.postLogoutRedirectUris ?? null,
      patch.public ?? null, patch.backchannelLogoutUri !== undefined, patch.backchannelLogoutUri ?? null,
      patch.allowGroups ?? null, patch.allowRoles ?? null, patch.listed ?? null],
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
