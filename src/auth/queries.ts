import type { Queryable } from '../db/db.ts';
import { USER_COLUMNS } from '../users/queries.ts';
import { CREDENTIALS_VERSION } from '../db/credentials-version.ts';
import type { UserRecord } from '../users/user.ts';

/** A user with what a sign-in checks. */
export interface LoginUser extends UserRecord {
  password_hash: string;
  totp_secret: string | null;
  totp_last_step: string | number | null;
  /** An administrator asked for a new password at the next sign-in. */
  must_change_password: boolean;
}

/** The user with this normalized username and their credentials, or null. */
export async function findLoginUser(q: Queryable, username: string): Promise<LoginUser | null> {
  const r = await q.query<LoginUser>(
    `SELECT ${USER_COLUMNS}, password_hash, totp_secret, totp_last_step, must_change_password FROM users WHERE username = $1`,
    [username],
  );
  return r.rows[0] ?? null;
}

/** Whether a sign-in's credentials still hold; when they do, with their version (CREDENTIALS_VERSION). */
export type CredentialsNow = { state: 'unchanged'; version: string; mustChange: boolean } | { state: 'password_changed' | 'inactive' };

/**
 * Whether the user still has the password hash a sign-in checked and is still active, with
 * the row locked (FOR SHARE) until the caller's transaction ends, so that a change cannot
 * commit between this check and the sign-in's own commit; and the version of the credentials
 * then, which the session or token the sign-in makes afterwards carries, and whether an
 * administrator has asked for a new password since (no session or token then either).
 */
export async function credentialsNow(q: Queryable, userId: number, checkedHash: string): Promise<CredentialsNow> {
  const r = await q.query<{ password_hash: string; active: boolean; version: string; must_change_password: boolean }>(
    `SELECT password_hash, active, ${CREDENTIALS_VERSION} AS version, must_change_password FROM users WHERE id = $1 FOR SHARE`, [userId]);
  const row = r.rows[0];
  if (!row || row.password_hash !== checkedHash) return { state: 'password_changed' };
  return row.active ? { state: 'unchanged', version: row.version, mustChange: row.must_change_password } : { state: 'inactive' };
}

/** The lock of a login name while it lasts: when it ends and the whole seconds left (rounded up, at least 1). */
export async function activeLock(q: Queryable, login: string): Promise<{ locked_until: Date; remaining_seconds: number } | null> {
  const r = await q.query<{ locked_until: Date; remaining_seconds: number }>(
    `SELECT locked_until, CEIL(EXTRACT(EPOCH FROM (locked_until - now())))::int AS remaining_seconds
     FROM login_attempts WHERE login = $1 AND locked_until > now()`,
    [login],
  );
  const row = r.rows[0];
  return row ? { locked_until: new Date(row.locked_until), remaining_seconds: Math.max(1, Number(row.remaining_seconds)) } : null;
}

/** What counting one failed sign-in did. */
export type FailureOutcome =
  | { counted: true; failedCount: number; lockedUntil: Date | null }
  /** The name was already locked (by a concurrent attempt): nothing was counted. */
  | { counted: false };

/**
 * Counts one failed sign-in of a login name in ONE statement, so concurrent attempts on
 * any number of instances can never count past the threshold:
 * - no row yet: insert count 1;
 * - a lock that has run out: the counter starts again at 1 and the lock is lifted;
 * - a lock still running: the row is left alone (attempts during a lock do not count and
 *   do not extend it), and nothing is returned;
 * - the count reaching `threshold`: the lock is set for `lockMinutes` from now.
 * PostgreSQL re-checks the ON CONFLICT ... WHERE condition against the latest row version
 * after waiting for a concurrent writer, which is what makes this race-free.
 */
export async function recordLoginFailure(
  q: Queryable,
  login: string,
  threshold: number,
  lockMinutes: number,
): Promise<FailureOutcome> {
  const r = await q.query<{ failed_count: number; locked_until: Date | null }>(
    `INSERT INTO login_attempts AS a (login, failed_count, locked_until, updated_at)
     VALUES ($1, 1, CASE WHEN 1 >= $2::int THEN now() + make_interval(mins => $3::int) END, now())
     ON CONFLICT (login) DO UPDATE SET
       failed_count = CASE WHEN a.locked_until IS NOT NULL THEN 1 ELSE a.failed_count + 1 END,
       locked_until = CASE
         WHEN (CASE WHEN a.locked_until IS NOT NULL THEN 1 ELSE a.failed_count + 1 END) >= $2::int
           THEN now() + make_interval(mins => $3::int)
         END,
       updated_at = now()
     WHERE a.locked_until IS NULL OR a.locked_until <= now()
     RETURNING failed_count, locked_until`,
    [login, threshold, lockMinutes],
  );
  const row = r.rows[0];
  if (!row) return { counted: false };
  return { counted: true, failedCount: Number(row.failed_count), lockedUntil: row.locked_until ? new Date(row.locked_until) : null };
}

/**
 * A successful sign-in resets the counter, unless a concurrent failure locked the name in
 * the meantime (a running lock is never lifted by a success that raced it).
 */
export async function resetLoginFailures(q: Queryable, login: string): Promise<void> {
  await q.query('DELETE FROM login_attempts WHERE login = $1 AND (locked_until IS NULL OR locked_until <= now())', [login]);
}

/**
 * Accepts TOTP time step `step` for a user once: it succeeds only when the step is later
 * than the last one accepted, in one statement, so a code (or an older one) replayed,
 * even concurrently, is refused.
 */
export async function claimTotpStep(q: Queryable, userId: number, step: number): Promise<boolean> {
  const r = await q.query(
    `UPDATE users SET totp_last_step = $2 WHERE id = $1 AND (totp_last_step IS NULL OR totp_last_step < $2) RETURNING id`,
    [userId, step],
  );
  return r.rowCount > 0;
}

/** Whether a TOTP time step is still unused by the user (claimTotpStep would take it), without taking it. */
export async function totpStepUnused(q: Queryable, userId: number, step: number): Promise<boolean> {
  const r = await q.query('SELECT 1 FROM users WHERE id = $1 AND (totp_last_step IS NULL OR totp_last_step < $2)', [userId, step]);
  return r.rowCount > 0;
}

/** Whether the user has this recovery code unused (consumeRecoveryCode would use it), without using it. */
export async function recoveryCodeUnused(q: Queryable, userId: number, codeHash: string): Promise<boolean> {
  const r = await q.query('SELECT 1 FROM recovery_codes WHERE user_id = $1 AND code_hash = $2 AND used_at IS NULL LIMIT 1', [userId, codeHash]);
  return r.rowCount > 0;
}

/** Marks one unused recovery code of a user used, in one statement; false when no such unused code. */
export async function consumeRecoveryCode(q: Queryable, userId: number, codeHash: string): Promise<boolean> {
  const r = await q.query(
    `UPDATE recovery_codes SET used_at = now() WHERE id = (
       SELECT id FROM recovery_codes WHERE user_id = $1 AND code_hash = $2 AND used_at IS NULL LIMIT 1 FOR UPDATE
     ) AND used_at IS NULL RETURNING id`,
    [userId, codeHash],
  );
  return r.rowCount > 0;
}

/** How many of a user's recovery codes are still unused. */
export async function countUnusedRecoveryCodes(q: Queryable, userId: number): Promise<number> {
  const r = await q.query<{ n: number }>('SELECT count(*)::int AS n FROM recovery_codes WHERE user_id = $1 AND used_at IS NULL', [userId]);
  return Number(r.rows[0]?.n ?? 0);
}

/** Replaces a user's recovery codes with new ones (hashes only). */
export async function replaceRecoveryCodes(q: Queryable, userId: number, codeHashes: string[]): Promise<void> {
  await q.query('DELETE FROM recovery_codes WHERE user_id = $1', [userId]);
  await q.query(
    'INSERT INTO recovery_codes (user_id, code_hash) SELECT $1, unnest($2::text[])',
    [userId, codeHashes],
  );
}

/** Stores a new, not yet enabled TOTP secret (setup); refused (false) while two-factor is on. */
export async function setPendingTotpSecret(q: Queryable, userId: number, secret: string): Promise<boolean> {
  const r = await q.query(
    'UPDATE users SET totp_secret = $2, totp_last_step = NULL, updated_at = now() WHERE id = $1 AND NOT totp_enabled RETURNING id',
    [userId, secret],
  );
  return r.rowCount > 0;
}

/** Turns two-factor on or off; off also forgets the secret and the recovery codes. */
export async function setTotpEnabled(q: Queryable, userId: number, enabled: boolean): Promise<void> {
  if (enabled) {
    await q.query('UPDATE users SET totp_enabled = true, updated_at = now() WHERE id = $1', [userId]);
    return;
  }
  await q.query('UPDATE users SET totp_enabled = false, totp_secret = NULL, totp_last_step = NULL, updated_at = now() WHERE id = $1', [userId]);
  await q.query('DELETE FROM recovery_codes WHERE user_id = $1', [userId]);
}

/** The TOTP state of a user. */
export async function findTotpState(q: Queryable, userId: number, options: { lock?: boolean } = {}): Promise<{ totp_enabled: boolean; totp_secret: string | null } | null> {
  const r = await q.query<{ totp_enabled: boolean; totp_secret: string | null }>(
    `SELECT totp_enabled, totp_secret FROM users WHERE id = $1${options.lock ? ' FOR NO KEY UPDATE' : ''}`,
    [userId],
  );
  return r.rows[0] ?? null;
}
