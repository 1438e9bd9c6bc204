import type { Queryable } from '../db/db.ts';

/** One signed-in session of a user, as their sessions page lists it. */
export interface UserSessionRow {
  sid: string;
  sess: Record<string, unknown> | string;
  created_at: Date;
  last_seen_at: Date;
  expire: Date;
}

/** The user's live sessions, most recently seen first. */
export async function listUserSessions(q: Queryable, userId: number): Promise<UserSessionRow[]> {
  const r = await q.query<UserSessionRow>(
    `SELECT sid, sess, created_at, last_seen_at, expire FROM sessions
      WHERE user_id = $1 AND expire > now() ORDER BY last_seen_at DESC, created_at DESC LIMIT 200`,
    [userId],
  );
  return r.rows;
}

/** Ends every session of a user but `exceptSid` (the caller's own, when kept); returns how many. */
export async function deleteUserSessions(q: Queryable, userId: number, exceptSid?: string): Promise<number> {
  const r = await q.query(
    'DELETE FROM sessions WHERE user_id = $1 AND ($2::text IS NULL OR sid <> $2)',
    [userId, exceptSid ?? null],
  );
  return r.rowCount;
}

/** Ends one session, only if it is this user's; false when there was none. */
export async function deleteUserSession(q: Queryable, userId: number, sid: string): Promise<boolean> {
  const r = await q.query('DELETE FROM sessions WHERE user_id = $1 AND sid = $2', [userId, sid]);
  return r.rowCount > 0;
}

/**
 * Holds a signed-in session of a user for the rest of the transaction (FOR SHARE): false when
 * it has ended. What is written under it (an SSO token issued in that session) is then
 * either refused, or committed before a sign-out that deletes the row and so sees it.
 */
export async function lockLiveSession(q: Queryable, sid: string, userId: number): Promise<boolean> {
  const r = await q.query('SELECT 1 FROM sessions WHERE sid = $1 AND user_id = $2 AND expire > now() FOR SHARE', [sid, userId]);
  return r.rowCount > 0;
}
