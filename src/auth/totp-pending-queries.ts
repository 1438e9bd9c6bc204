import type { Queryable } from '../db/db.ts';

// Two-factor setups not yet confirmed (migrations/0022_totp_pending.sql): each belongs to the
// session or access token that started it ('session:<sid>', 'token:<jti>') and expires.

/**
 * Stores a new pending secret for `owner` (replacing its earlier one) that lasts `ttlSeconds`;
 * refused (false) while two-factor is on. One statement: the user's row is read FOR SHARE, so
 * an enabling committed meanwhile is seen.
 */
export async function savePendingTotp(q: Queryable, userId: number, owner: string, secret: string, ttlSeconds: number): Promise<boolean> {
  const r = await q.query(
    `INSERT INTO totp_pending (owner, user_id, secret, expires_at)
     SELECT $2, id, $3, now() + make_interval(secs => $4) FROM users WHERE id = $1 AND NOT totp_enabled FOR SHARE
     ON CONFLICT (owner) DO UPDATE SET user_id = EXCLUDED.user_id, secret = EXCLUDED.secret, created_at = now(), expires_at = EXCLUDED.expires_at
     RETURNING owner`,
    [userId, owner, secret, ttlSeconds],
  );
  return r.rowCount > 0;
}

/** The user's unexpired pending secret of `owner`, or null; `lock` holds it for the transaction. */
export async function findPendingTotp(q: Queryable, userId: number, owner: string, options: { lock?: boolean } = {}): Promise<string | null> {
  const r = await q.query<{ secret: string }>(
    `SELECT secret FROM totp_pending WHERE owner = $1 AND user_id = $2 AND expires_at > now()${options.lock ? ' FOR UPDATE' : ''}`,
    [owner, userId],
  );
  return r.rows[0]?.secret ?? null;
}

/** Forgets every pending setup of the user (two-factor turned on, new credentials, signed out everywhere). */
export async function deletePendingTotp(q: Queryable, userId: number): Promise<void> {
  await q.query('DELETE FROM totp_pending WHERE user_id = $1', [userId]);
}

/**
 * Turns two-factor on with `secret`, its time step `step` used up by the code that proved it:
 * false when it is on already.
 */
export async function enableTotpWith(q: Queryable, userId: number, secret: string, step: number): Promise<boolean> {
  const r = await q.query(
    'UPDATE users SET totp_enabled = true, totp_secret = $2, totp_last_step = $3, updated_at = now() WHERE id = $1 AND NOT totp_enabled RETURNING id',
    [userId, secret, step],
  );
  return r.rowCount > 0;
}
