import type { Queryable } from '../db/db.ts';
import { normalizeUsername } from '../validation/username.ts';
import { admitsSql } from '../access/queries.ts';

/** A link is pending until its client system or an administrator proves it. */
export type LinkStatus = 'pending' | 'active';

/** Who proved a link. */
export type LinkProver = 'client' | 'admin';

/** One user's username at one client system. */
export interface LinkRow {
  user_id: number;
  client_id: string;
  external_username: string;
  status: LinkStatus;
  created_at: Date;
  confirmed_at: Date | null;
  confirmed_by: LinkProver | null;
}

/** A link with the names administrators and client systems see next to it. */
export interface LinkListRow extends LinkRow {
  username: string;
  client_name: string;
}

/** A client system as the dashboard lists it, with the user's link if any. */
export interface DashboardSystemRow {
  client_id: string;
  client_name: string;
  callback_url: string;
  /** The client's initiate-login URL (migrations/0023), or null. */
  initiate_login_uri: string | null;
  logo_url: string | null;
  external_username: string | null;
  status: LinkStatus | null;
}

const LINK_COLUMNS = 'l.user_id, l.client_id, l.external_username, l.status, l.created_at, l.confirmed_at, l.confirmed_by';

/**
 * The key a name is unique under at a client (the column username_key, written by the
 * service): the name normalized as usernames are, so that a link's name and an account's
 * username are compared as sign-in compares names (migrations/0014_name_keys_and_event_locks.sql).
 */
export const linkNameKey = normalizeUsername;

/**
 * The launcher's client systems: active, listed, and open to this user by their access rule
 * (docs/access.md), read now; the user's links first, then by name.
 */
export async function dashboardSystems(q: Queryable, userId: number): Promise<DashboardSystemRow[]> {
  const r = await q.query<DashboardSystemRow>(
    `SELECT c.client_id, c.client_name, c.callback_url, c.initiate_login_uri, c.logo_url, l.external_username, l.status
       FROM clients c
       JOIN users u ON u.id = $1
       LEFT JOIN user_client_links l ON l.client_id = c.client_id AND l.user_id = $1
      WHERE c.active AND c.listed AND ${admitsSql('u', 'c')}
      ORDER BY (l.external_username IS NULL), lower(c.client_name), c.client_id`,
    [userId],
  );
  return r.rows;
}

/** The user's link at one client system, locked for the transaction when `lock` is set. */
export async function findLink(q: Queryable, userId: number, clientId: string, lock = false): Promise<LinkRow | null> {
  const r = await q.query<LinkRow>(
    `SELECT ${LINK_COLUMNS} FROM user_client_links l WHERE l.user_id = $1 AND l.client_id = $2${lock ? ' FOR UPDATE' : ''}`,
    [userId, clientId],
  );
  return r.rows[0] ?? null;
}

/** True when `name` and the link's name are one name, normalized as the unique index compares them. */
export function isSameName(link: LinkRow, name: string): boolean {
  return linkNameKey(link.external_username) === linkNameKey(name);
}

/** True when the client system exists and is active. */
export async function clientIsActive(q: Queryable, clientId: string): Promise<boolean> {
  const r = await q.query('SELECT 1 FROM clients WHERE client_id = $1 AND active', [clientId]);
  return r.rowCount > 0;
}

/**
 * Inserts a pending link whatever the name: a claim holds nothing (only an active link does,
 * by the partial unique index of migrations/0029), so it neither conflicts with nor tells of
 * anyone else's claim, link or username. Null only when the user has a link at that client
 * already (the same claim sent twice at once: the other one's row won).
 */
export async function insertPendingLink(q: Queryable, userId: number, clientId: string, name: string): Promise<LinkRow | null> {
  const r = await q.query<LinkRow>(
    `INSERT INTO user_client_links AS l (user_id, client_id, external_username, username_key, status)
     VALUES ($1, $2, $3, $4, 'pending')
     ON CONFLICT (user_id, client_id) DO NOTHING
     RETURNING ${LINK_COLUMNS}`,
    [userId, clientId, name, linkNameKey(name)],
  );
  return r.rows[0] ?? null;
}

/**
 * Whether the name of the user's link at a client system belongs to someone else there:
 * another user's own username (a token without a link carries it), or another user's active
 * link of the same name. Asked before a claim is proven.
 */
export async function linkNameHeldByAnother(q: Queryable, userId: number, clientId: string): Promise<boolean> {
  const r = await q.query(
    `SELECT 1 FROM user_client_links l
      WHERE l.user_id = $1 AND l.client_id = $2
        AND (EXISTS (SELECT 1 FROM users u WHERE u.username = l.username_key AND u.id <> l.user_id)
          OR EXISTS (SELECT 1 FROM user_client_links o
                      WHERE o.client_id = l.client_id AND o.username_key = l.username_key AND o.user_id <> l.user_id AND o.status = 'active'))`,
    [userId, clientId],
  );
  return r.rowCount > 0;
}

/** Whether an active link, at any client system, has this (normalized) name; a pending claim holds nothing. */
export async function linkNameInUse(q: Queryable, username: string): Promise<boolean> {
  const r = await q.query("SELECT 1 FROM user_client_links WHERE username_key = $1 AND status = 'active' LIMIT 1", [linkNameKey(username)]);
  return r.rowCount > 0;
}

/** Deletes the user's link at a client system; the deleted row, or null when there was none. */
export async function deleteLink(q: Queryable, userId: number, clientId: string): Promise<LinkRow | null> {
  const r = await q.query<LinkRow>(
    `DELETE FROM user_client_links l WHERE l.user_id = $1 AND l.client_id = $2 RETURNING ${LINK_COLUMNS}`,
    [userId, clientId],
  );
  return r.rows[0] ?? null;
}

/**
 * Makes a pending link active, recording who proved it; with `name`, only when the link's
 * name matches it (normalized), and then the prover's spelling is kept. Returns the link as it
 * is afterwards (also when it was active already), or null when no such link exists.
 */
export async function activateLink(
  q: Queryable,
  userId: number,
  clientId: string,
  prover: LinkProver,
  name?: string,
): Promise<{ link: LinkRow; changed: boolean } | null> {
  const r = await q.query<LinkRow & { changed: boolean }>(
    `WITH target AS (
       SELECT user_id, client_id, status FROM user_client_links
        WHERE user_id = $1 AND client_id = $2 AND ($5::text IS NULL OR username_key = $5)
        FOR UPDATE
     ), updated AS (
       UPDATE user_client_links l
          SET status = 'active', confirmed_at = now(), confirmed_by = $3,
              external_username = COALESCE($4::text, l.external_username)
         FROM target t
        WHERE l.user_id = t.user_id AND l.client_id = t.client_id AND t.status = 'pending'
       RETURNING ${LINK_COLUMNS}
     )
     SELECT *, true AS changed FROM updated
     UNION ALL
     SELECT ${LINK_COLUMNS}, false AS changed FROM user_client_links l JOIN target t USING (user_id, client_id)
      WHERE t.status = 'active'`,
    [userId, clientId, prover, name ?? null, name === undefined ? null : linkNameKey(name)],
  );
  const row = r.rows[0];
  if (!row) return null;
  const { changed, ...link } = row;
  return { link, changed };
}

/** Links matching the filter, oldest request first, with the account and client names. */
export async function listLinks(
  q: Queryable,
  filter: { status?: LinkStatus; clientId?: string; userId?: number },
  limit: number,
): Promise<LinkListRow[]> {
  const r = await q.query<LinkListRow>(
    `SELECT ${LINK_COLUMNS}, u.username, c.client_name
       FROM user_client_links l
       JOIN users u ON u.id = l.user_id
       JOIN clients c ON c.client_id = l.client_id
      WHERE ($1::text IS NULL OR l.status = $1) AND ($2::text IS NULL OR l.client_id = $2) AND ($3::int IS NULL OR l.user_id = $3)
      ORDER BY l.created_at, l.user_id, l.client_id
      LIMIT $4`,
    [filter.status ?? null, filter.clientId ?? null, filter.userId ?? null, limit],
  );
  return r.rows;
}
