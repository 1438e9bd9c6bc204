import { CREDENTIALS_VERSION } from '../db/credentials-version.ts';
import type { Queryable } from '../db/db.ts';
import { USER_COLUMNS } from '../users/queries.ts';
import type { UserRecord } from '../users/user.ts';

/** A user with the stored password hash and the must-change flag. */
export interface PasswordUser extends UserRecord {
  password_hash: string;
  must_change_password: boolean;
}

/** The user with this id and their password hash, or null. */
export async function findPasswordUser(q: Queryable, userId: number): Promise<PasswordUser | null> {
  const r = await q.query<PasswordUser>(
    `SELECT ${USER_COLUMNS}, password_hash, must_change_password FROM users WHERE id = $1`,
    [userId],
  );
  return r.rows[0] ?? null;
}

/**
 * Active users a forgot-password request may mean: the one whose (normalized) username it
 * is, or those whose email address it is (addresses are not unique). At most five.
 */
export async function findResetCandidates(q: Queryable, username: string, email: string): Promise<UserRecord[]> {
  const r = await q.query<UserRecord>(
    `SELECT ${USER_COLUMNS} FROM users
      WHERE active AND email <> '' AND (username = $1 OR lower(email) = lower($2))
      ORDER BY (username = $1) DESC, id LIMIT 5`,
    [username, email],
  );
  return r.rows;
}

/**
 * Stores a new reset token (its hash) for a user and answers the address to mail it to,
 * unless one was made for them less than `intervalSeconds` ago (`recently_sent`: nothing
 * changes) or the user is no longer active with an address (`unavailable`). Older links stay
 * usable until they expire, one is used or the password changes: a stranger asking for
 * resets of someone's account can neither kill the link in their mailbox nor send more than
 * one mail an interval. Used and expired rows of the user are dropped here. Call inside a
 * transaction: the user's row is locked, so two requests at once make one link, and the
 * address is read under that lock: an administrator's change of it (which kills the user's
 * links) committed while this waited sends the link to the new address, not the old one.
 */
export async function insertPasswordReset(
  q: Queryable, userId: number, tokenHash: string, ttlSeconds: number, intervalSeconds: number,
): Promise<{ email: string } | 'recently_sent' | 'unavailable'> {
  const user = await lockUserRow(q, userId);
  if (!user || !user.active || user.email === '') return 'unavailable';
  const recent = await q.query(
    'SELECT 1 FROM password_resets WHERE user_id = $1 AND created_at > now() - make_interval(secs => $2::int) LIMIT 1',
    [userId, intervalSeconds],
  );
  if (recent.rowCount > 0) return 'recently_sent';
  await q.query('DELETE FROM password_resets WHERE user_id = $1 AND (used_at IS NOT NULL OR expires_at <= now())', [userId]);
  await q.query(
    `INSERT INTO password_resets (user_id, token_hash, expires_at) VALUES ($1, $2, now() + make_interval(secs => $3::int))`,
    [userId, tokenHash, ttlSeconds],
  );
  return { email: user.email };
}

/** Every reset link of a user dies (their password or their mailbox changed). */
export async function deletePasswordResets(q: Queryable, userId: number): Promise<void> {
  await q.query('DELETE FROM password_resets WHERE user_id = $1', [userId]);
}

/** One reset link dies (its mail never went out). */
export async function deletePasswordReset(q: Queryable, tokenHash: string): Promise<void> {
  await q.query('DELETE FROM password_resets WHERE token_hash = $1', [tokenHash]);
}

/** The user a reset token hash belongs to while it is unused and unexpired, or null (it is not used up). */
export async function findValidReset(q: Queryable, tokenHash: string): Promise<number | null> {
  const r = await q.query<{ user_id: number }>(
    'SELECT user_id FROM password_resets WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()',
    [tokenHash],
  );
  return r.rows[0]?.user_id ?? null;
}

/**
 * Uses a reset token up in one statement: only one of any number of concurrent uses gets
 * the user id back; a used, expired or unknown token gives null.
 */
export async function consumePasswordReset(q: Queryable, tokenHash: string): Promise<number | null> {
  const r = await q.query<{ user_id: number }>(
    `UPDATE password_resets SET used_at = now()
      WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now() RETURNING user_id`,
    [tokenHash],
  );
  return r.rows[0]?.user_id ?? null;
}

/**
 * Locks the user's row for the rest of the transaction, answering its address and active flag
 * as they are under the lock (null: no such user), against every other writer of it and
 * against sign-ins (credentialsNow, saveSignedInSession: FOR SHARE). FOR NO KEY UPDATE, the
 * lock an UPDATE of the row takes, not FOR UPDATE: that would also block inserting a row that
 * refers to the user (its foreign-key check, or holdTokenOwners for an SSO token), and an SSO token being issued in a session this
 * transaction is about to end holds that session's row while it inserts: each would wait for
 * the other (a deadlock, answered 500). Every lock on a user's row here is of this kind.
 */
export async function lockUserRow(q: Queryable, userId: number): Promise<{ email: string; active: boolean } | null> {
  return (await q.query<{ email: string; active: boolean }>('SELECT email, active FROM users WHERE id = $1 FOR NO KEY UPDATE', [userId])).rows[0] ?? null;
}

/**
 * Stores a new password hash: the must-change flag as given, every reset link of the user
 * dead, and access tokens issued before now refused (password_changed_at).
 */
export async function storePassword(q: Queryable, userId: number, passwordHash: string, mustChange: boolean): Promise<void> {
  await q.query(
    `UPDATE users SET password_hash = $2, must_change_password = $3, password_changed_at = now(), updated_at = now()
      WHERE id = $1`,
    [userId, passwordHash, mustChange],
  );
  await deletePasswordResets(q, userId);
}

/** Sets or clears the must-change flag alone; false when it already was so (nothing written). */
export async function setMustChangePassword(q: Queryable, userId: number, mustChange: boolean): Promise<boolean> {
  const r = await q.query('UPDATE users SET must_change_password = $2, updated_at = now() WHERE id = $1 AND must_change_password IS DISTINCT FROM $2', [userId, mustChange]);
  return r.rowCount > 0;
}

/**
 * The user with this id, when their credentials last changed or they signed out everywhere
 * (access tokens issued before are refused) and the version of their credentials, and whether
 * the access token `jti` was signed out by itself; or null.
 */
export async function findTokenUser(
  q: Queryable, userId: number, jti: string,
): Promise<{ user: UserRecord; changedAt: Date | null; credentialsVersion: string; revoked: boolean } | null> {
  const r = await q.query<UserRecord & { password_changed_at: Date | null; credentials_version: string; revoked: boolean }>(
    `SELECT ${USER_COLUMNS}, password_changed_at, ${CREDENTIALS_VERSION} AS credentials_version,
            EXISTS (SELECT 1 FROM revoked_access_tokens WHERE jti = $2) AS revoked
       FROM users WHERE id = $1`,
    [userId, jti],
  );
  const row = r.rows[0];
  if (!row) return null;
  const { password_changed_at: at, credentials_version: credentialsVersion, revoked, ...user } = row;
  return { user, changedAt: at ? new Date(at) : null, credentialsVersion, revoked };
}

/** Signs out one access token (until it expires, when the pruner drops the row). */
export async function revokeAccessToken(q: Queryable, token: { jti: string; userId: number; expiresAt: Date }): Promise<void> {
  await q.query(
    'INSERT INTO revoked_access_tokens (jti, user_id, expires_at) VALUES ($1, $2, $3) ON CONFLICT (jti) DO NOTHING',
    [token.jti, token.userId, token.expiresAt],
  );
}

/**
 * Marks the user's credentials as changed now without a new password (sign out everywhere),
 * locking their row; returns the new version of their credentials.
 */
export async function touchCredentials(q: Queryable, userId: number): Promise<string> {
  const r = await q.query<{ version: string }>(`UPDATE users SET password_changed_at = now() WHERE id = $1 RETURNING ${CREDENTIALS_VERSION} AS version`, [userId]);
  return r.rows[0]?.version ?? '0';
}
