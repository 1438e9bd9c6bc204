import { createLookupLoader } from '../db/batch.ts';
import type { Queryable } from '../db/db.ts';
import type { UserRecord } from './user.ts';

export const USER_COLUMNS = 'id, username, email, role, full_name, active, totp_enabled';

/** The user with this normalized username, or null. */
export async function findUserByUsername(q: Queryable, username: string): Promise<UserRecord | null> {
  const r = await q.query<UserRecord>(`SELECT ${USER_COLUMNS} FROM users WHERE username = $1`, [username]);
  return r.rows[0] ?? null;
}

/** The users with these normalized usernames that exist, in no particular order. */
export async function findUsersByUsername(q: Queryable, usernames: readonly string[]): Promise<UserRecord[]> {
  return (await q.query<UserRecord>(`SELECT ${USER_COLUMNS} FROM users WHERE username = ANY ($1::text[])`, [usernames], { prepare: true })).rows;
}

/**
 * Users by normalized username for a hot path: lookups arriving together share one
 * statement (src/db/batch.ts).
 */
export function createUserLookup(q: Queryable): { byUsername(username: string): Promise<UserRecord | null> } {
  const loader = createLookupLoader((names: string[]) => findUsersByUsername(q, names), (u) => u.username);
  return { byUsername: (username) => loader.load(username) };
}

/** The user with this id, or null. */
export async function findUserById(q: Queryable, id: number): Promise<UserRecord | null> {
  const r = await q.query<UserRecord>(`SELECT ${USER_COLUMNS} FROM users WHERE id = $1`, [id]);
  return r.rows[0] ?? null;
}

/** Inserts a user; throws the database's unique violation (23505) for a taken username. */
export async function insertUser(
  q: Queryable,
  u: { username: string; email: string; role: string; fullName: string; passwordHash: string; active: boolean },
): Promise<UserRecord> {
  const r = await q.query<UserRecord>(
    `INSERT INTO users (username, email, role, full_name, password_hash, active)
     VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${USER_COLUMNS}`,
    [u.username, u.email, u.role, u.fullName, u.passwordHash, u.active],
  );
  return r.rows[0];
}

/** Activates or deactivates a user; null when there is no such user. */
export async function setUserActive(q: Queryable, username: string, active: boolean): Promise<(UserRecord & { was_active: boolean }) | null> {
  // was_active: what the row said before (locked, so a concurrent change waits): a deactivation
  // signs the user out only when they were active
  const r = await q.query<UserRecord & { was_active: boolean }>(
    `WITH before AS (SELECT id AS bid, active AS was_active FROM users WHERE username = $1 FOR NO KEY UPDATE)
     UPDATE users SET active = $2, updated_at = now() FROM before WHERE id = before.bid RETURNING ${USER_COLUMNS}, before.was_active`,
    [username, active],
  );
  return r.rows[0] ?? null;
}

/** Clears the failed-login counter and any lock of a login name. */
export async function clearLoginAttempts(q: Queryable, login: string): Promise<boolean> {
  return ((await q.query('DELETE FROM login_attempts WHERE login = $1', [login])).rowCount ?? 0) > 0;
}

/** The profile fields an administrator changes (updateUserProfile). */
export interface ProfileFields {
  email: string;
  full_name: string;
  role: string;
  active: boolean;
}

/**
 * Changes the fields given (undefined keeps one); null when there is no such user. Answers the
 * row after the change and `before`, the same fields as they were (read under the row's lock,
 * so they are what this statement replaced). A change that changes nothing keeps updated_at.
 */
export async function updateUserProfile(
  q: Queryable,
  id: number,
  patch: Partial<ProfileFields>,
): Promise<({ id: number; username: string } & ProfileFields & { before: ProfileFields }) | null> {
  type Row = { id: number; username: string; was_email: string; was_full_name: string; was_role: string; was_active: boolean } & ProfileFields;
  const r = await q.query<Row>(
    `WITH before AS (SELECT id AS bid, email AS was_email, full_name AS was_full_name, role AS was_role, active AS was_active
                       FROM users WHERE id = $1 FOR NO KEY UPDATE)
     UPDATE users SET email = COALESCE($2, email), full_name = COALESCE($3, full_name), role = COALESCE($4, role),
       active = COALESCE($5, active),
       updated_at = CASE WHEN (COALESCE($2, email), COALESCE($3, full_name), COALESCE($4, role), COALESCE($5, active))
                              IS DISTINCT FROM (email, full_name, role, active) THEN now() ELSE updated_at END
     FROM before WHERE id = before.bid
     RETURNING id, username, email, full_name, role, active, was_email, was_full_name, was_role, was_active`,
    [id, patch.email ?? null, patch.full_name ?? null, patch.role ?? null, patch.active ?? null],
  );
  const row = r.rows[0];
  if (!row) return null;
  const { was_email: email, was_full_name: fullName, was_role: role, was_active: active, ...after } = row;
  return { ...after, before: { email, full_name: fullName, role, active } };
}

/** Locks every active administrator's row for the rest of the transaction (as lockUserRow does). */
export async function lockActiveAdmins(q: Queryable): Promise<void> {
  await q.query("SELECT id FROM users WHERE role = 'admin' AND active FOR NO KEY UPDATE");
}

/** How many active administrators there are. */
export async function countActiveAdmins(q: Queryable): Promise<number> {
  const r = await q.query<{ n: number }>("SELECT count(*)::int AS n FROM users WHERE role = 'admin' AND active");
  return r.rows[0]?.n ?? 0;
}
