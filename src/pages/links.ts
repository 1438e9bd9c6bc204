import { writeAudit } from '../audit/writer.ts';
import type { Db, Queryable } from '../db/db.ts';
import { AppError } from '../http/errors.ts';
import type { UserRecord } from '../users/queries.ts';

/** A client system as the dashboard lists it, with the user's link if any. */
export interface DashboardSystem {
  client_id: string;
  client_name: string;
  callback_url: string;
  external_username: string | null;
}

/** Active client systems, the user's links first, then by name. */
export async function listDashboardSystems(q: Queryable, userId: number): Promise<DashboardSystem[]> {
  const r = await q.query<DashboardSystem>(
    `SELECT c.client_id, c.client_name, c.callback_url, l.external_username
       FROM clients c
       LEFT JOIN user_client_links l ON l.client_id = c.client_id AND l.user_id = $1
      WHERE c.active
      ORDER BY (l.external_username IS NULL), lower(c.client_name), c.client_id`,
    [userId],
  );
  return r.rows;
}

/** The user's username at one client system, or null when not linked. */
export async function findLink(q: Queryable, userId: number, clientId: string): Promise<string | null> {
  const r = await q.query<{ external_username: string }>(
    'SELECT external_username FROM user_client_links WHERE user_id = $1 AND client_id = $2',
    [userId, clientId],
  );
  return r.rows[0]?.external_username ?? null;
}

/** Who changed a link, for the audit log. */
interface LinkContext {
  ipAddress: string;
  userAgent: string | null;
}

/**
 * Links (or re-links) the user to an active client system under `externalUsername`.
 * One upsert: two concurrent submissions leave one row, the later name.
 */
export async function linkClient(db: Db, user: UserRecord, clientId: string, externalUsername: string, ctx: LinkContext): Promise<void> {
  await db.transaction(async (tx) => {
    const r = await tx.query(
      `INSERT INTO user_client_links (user_id, client_id, external_username)
       SELECT $1, client_id, $3 FROM clients WHERE client_id = $2 AND active
       ON CONFLICT (user_id, client_id) DO UPDATE SET external_username = EXCLUDED.external_username, created_at = now()`,
      [user.id, clientId, externalUsername],
    );
    if (r.rowCount === 0) throw new AppError(404, 'client_not_found', 'That client system does not exist or is inactive');
    await writeAudit(tx, {
      action: 'user.link_client', outcome: 'success', userId: user.id, username: user.username, clientId,
      ipAddress: ctx.ipAddress, userAgent: ctx.userAgent, details: { via: 'page', external_username: externalUsername },
    });
  });
}

/** Removes the user's link to a client system; false when there was none. */
export async function unlinkClient(db: Db, user: UserRecord, clientId: string, ctx: LinkContext): Promise<boolean> {
  return db.transaction(async (tx) => {
    const r = await tx.query('DELETE FROM user_client_links WHERE user_id = $1 AND client_id = $2', [user.id, clientId]);
    if (r.rowCount === 0) return false;
    await writeAudit(tx, {
      action: 'user.unlink_client', outcome: 'success', userId: user.id, username: user.username, clientId,
      ipAddress: ctx.ipAddress, userAgent: ctx.userAgent, details: { via: 'page' },
    });
    return true;
  });
}
