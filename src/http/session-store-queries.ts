import { CREDENTIALS_VERSION } from '../db/credentials-version.ts';
import type { Queryable } from '../db/db.ts';

/**
 * The session store's statements (src/http/session.ts, for express-session). A row is live
 * until `expire`; `stale` says its "last seen" is older than `lastSeenStepSeconds`.
 */
export async function readSession(q: Queryable, sid: string, lastSeenStepSeconds: number): Promise<{ sess: unknown; stale: boolean } | null> {
  const r = await q.query<{ sess: unknown; stale: boolean }>(
    'SELECT sess, last_seen_at < now() - make_interval(secs => $2) AS stale FROM sessions WHERE sid = $1 AND expire > now()',
    [sid, lastSeenStepSeconds],
  );
  return r.rows[0] ?? null;
}

/** Moves a session's "last seen" to now. */
export async function touchSessionLastSeen(q: Queryable, sid: string): Promise<void> {
  await q.query('UPDATE sessions SET last_seen_at = now() WHERE sid = $1', [sid]);
}

/** Writes a new session (or one read before, with upsert semantics) with its expiry. */
export async function saveSession(q: Queryable, sid: string, sessJson: string, expire: Date): Promise<void> {
  await q.query(
    `INSERT INTO sessions (sid, sess, expire) VALUES ($1, $2::jsonb, $3)
     ON CONFLICT (sid) DO UPDATE SET sess = EXCLUDED.sess, expire = EXCLUDED.expire`,
    [sid, sessJson, expire],
  );
}

/**
 * Writes a new signed-in session only while the user's credentials are still of the version
 * its sign-in saw, holding the user's row (FOR SHARE) as it does: false, and nothing written,
 * when they moved since (a password change or reset, a sign-out everywhere or a deactivation
 * committed after the sign-in checked the password). A change that commits later deletes
 * the row with the user's others.
 */
export async function saveSignedInSession(
  q: Queryable, sid: string, sessJson: string, expire: Date, signedIn: { userId: number; credentialsVersion: string; renewedFrom?: string },
): Promise<boolean> {
  // with the row saved, the user's SSO tokens issued under the id it had before are moved to it
  const r = await q.query<{ saved: number }>(
    `WITH saved AS (
       INSERT INTO sessions (sid, sess, expire)
       SELECT $1, $2::jsonb, $3 FROM users WHERE id = $4 AND ${CREDENTIALS_VERSION} = $5 FOR SHARE
       ON CONFLICT (sid) DO UPDATE SET sess = EXCLUDED.sess, expire = EXCLUDED.expire
       RETURNING sid),
     moved AS (
       UPDATE sso_tokens SET session_id = $1
        WHERE $6::text IS NOT NULL AND session_id = $6 AND user_id = $4 AND EXISTS (SELECT 1 FROM saved))
     SELECT count(*)::int AS saved FROM saved`,
    [sid, sessJson, expire, signedIn.userId, signedIn.credentialsVersion, signedIn.renewedFrom ?? null],
  );
  return r.rows[0].saved > 0;
}

/**
 * Writes a session that was read from the table, only if its row is still there: false when
 * it was deleted meanwhile (ended by a sign-out everywhere, a password change or reset).
 */
export async function updateSession(q: Queryable, sid: string, sessJson: string, expire: Date): Promise<boolean> {
  const r = await q.query('UPDATE sessions SET sess = $2::jsonb, expire = $3 WHERE sid = $1', [sid, sessJson, expire]);
  return r.rowCount > 0;
}

/** Deletes one session. */
export async function deleteSession(q: Queryable, sid: string): Promise<void> {
  await q.query('DELETE FROM sessions WHERE sid = $1', [sid]);
}
