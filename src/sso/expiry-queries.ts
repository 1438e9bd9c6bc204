import type { Queryable } from '../db/db.ts';

/**
 * Marks up to `limit` tokens that expired unused as notified and answers them. The WHERE
 * re-checks `expiry_notified_at IS NULL` on the latest row version: when several instances
 * sweep at once, each token is taken by exactly one of them.
 */
export async function markExpiredTokensNotified(q: Queryable, limit: number): Promise<Array<{ jti: string; user_id: number; client_id: string; expires_at: Date }>> {
  const r = await q.query<{ jti: string; user_id: number; client_id: string; expires_at: Date }>(
    `UPDATE sso_tokens t SET expiry_notified_at = now()
     WHERE t.jti IN (
       SELECT jti FROM sso_tokens
       WHERE expiry_notified_at IS NULL AND used_at IS NULL AND invalidated_at IS NULL AND expires_at <= now()
       ORDER BY expires_at LIMIT $1
       FOR UPDATE SKIP LOCKED)
     AND t.expiry_notified_at IS NULL
     RETURNING t.jti, t.user_id, t.client_id, t.expires_at`,
    [limit],
  );
  return r.rows;
}
