import type { Queryable } from '../db/db.ts';

export async function insertIssuedToken(
  q: Queryable,
  t: { jti: string; userId: number; clientId: string; username: string; ipAddress: string; issuedAt: Date; expiresAt: Date },
): Promise<void> {
  await q.query(
    `INSERT INTO sso_tokens (jti, user_id, client_id, username, ip_address, issued_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [t.jti, t.userId, t.clientId, t.username, t.ipAddress, t.issuedAt, t.expiresAt],
  );
}

/** The user a consumed token named. */
export interface ConsumedToken {
  user_id: number;
  username: string;
  email: string;
  expires_at: Date;
}

/**
 * Marks a token used, in one statement: of any number of concurrent calls exactly one gets
 * the row back. Only the client the token was issued for can consume it, only while it is
 * unused, not invalidated, unexpired and its user active. The success audit row is written
 * by the same statement (one round trip on the hot path).
 */
export async function consumeToken(
  q: Queryable,
  args: { jti: string; clientId: string; ipAddress: string; userAgent: string | null },
): Promise<ConsumedToken | null> {
  const r = await q.query<ConsumedToken>(
    `WITH consumed AS (
       UPDATE sso_tokens t SET used_at = now()
       FROM users u
       WHERE t.jti = $1 AND t.client_id = $2 AND u.id = t.user_id AND u.active
         AND t.used_at IS NULL AND t.invalidated_at IS NULL AND t.expires_at > now()
       RETURNING u.id AS user_id, u.username, u.email, t.expires_at
     ), audit AS (
       INSERT INTO audit_log (action, outcome, user_id, username, client_id, ip_address, user_agent, details)
       SELECT 'token.validate', 'success', user_id, username, $2, $3, $4, jsonb_build_object('jti', $1::text)
       FROM consumed
     )
     SELECT user_id, username, email, expires_at FROM consumed`,
    [args.jti, args.clientId, args.ipAddress, args.userAgent],
  );
  return r.rows[0] ?? null;
}

/** The state of a token that could not be consumed, to say why. */
export async function tokenState(
  q: Queryable,
  jti: string,
): Promise<{ client_id: string; used_at: Date | null; invalidated_at: Date | null; expires_at: Date; user_active: boolean; user_id: number } | null> {
  const r = await q.query<{ client_id: string; used_at: Date | null; invalidated_at: Date | null; expires_at: Date; user_active: boolean; user_id: number }>(
    `SELECT t.client_id, t.used_at, t.invalidated_at, t.expires_at, u.active AS user_active, u.id AS user_id
     FROM sso_tokens t JOIN users u ON u.id = t.user_id WHERE t.jti = $1`,
    [jti],
  );
  return r.rows[0] ?? null;
}
