import type { Queryable } from '../db/db.ts';
import { USER_COLUMNS } from '../users/queries.ts';
import type { UserRecord } from '../users/user.ts';

/**
 * The access rule as an SQL condition, for user row `u` and client row `c` of the statement it
 * is put in (migrations/0027_groups_and_access.sql): open when the client names no group and no
 * role, otherwise the user's role is one named or the user is in a group named. Written into
 * the hot statements themselves (token issue, validation), so the rule and the membership are
 * read by the statement that writes: a change committed before it is seen, with no round trip.
 */
export function admitsSql(u: string, c: string): string {
  return `(cardinality(${c}.allow_groups) + cardinality(${c}.allow_roles) = 0 OR ${u}.role = ANY (${c}.allow_roles)
    OR EXISTS (SELECT 1 FROM user_groups ug JOIN groups g ON g.id = ug.group_id WHERE ug.user_id = ${u}.id AND g.name = ANY (${c}.allow_groups)))`;
}

/** The names of user `u`'s groups, sorted, as an SQL array expression (text[]). */
export function groupsOfSql(u: string): string {
  return `ARRAY(SELECT g.name FROM user_groups ug JOIN groups g ON g.id = ug.group_id WHERE ug.user_id = ${u}.id ORDER BY g.name)`;
}

/** A group as stored, with how many users are in it. */
export interface GroupRow {
  id: number;
  name: string;
  created_at: Date;
  members: number;
}

export async function listGroups(q: Queryable): Promise<GroupRow[]> {
  return (await q.query<GroupRow>(
    `SELECT g.id, g.name, g.created_at, (SELECT count(*)::int FROM user_groups ug WHERE ug.group_id = g.id) AS members
       FROM groups g ORDER BY g.name`,
  )).rows;
}

/** Creates a group; null when the name is taken. */
export async function insertGroup(q: Queryable, name: string): Promise<GroupRow | null> {
  const r = await q.query<GroupRow>(
    'INSERT INTO groups (name) VALUES ($1) ON CONFLICT (name) DO NOTHING RETURNING id, name, created_at, 0 AS members',
    [name],
  );
  return r.rows[0] ?? null;
}

/** Deletes a group (its memberships go with it); how many members it had, or null when there was none. */
export async function deleteGroup(q: Queryable, name: string): Promise<{ members: number } | null> {
  const r = await q.query<{ members: number }>(
    `WITH gone AS (DELETE FROM groups WHERE name = $1 RETURNING id)
     SELECT (SELECT count(*)::int FROM user_groups ug JOIN gone ON ug.group_id = gone.id) AS members FROM gone`,
    [name],
  );
  return r.rows[0] ?? null;
}

/**
 * Puts a user in a group: 'added', 'already' (a member before), or what is missing. The user's
 * row is held FOR KEY SHARE by the foreign key; the group's too.
 */
export async function addMember(q: Queryable, userId: number, name: string): Promise<'added' | 'already' | 'no_group' | 'no_user'> {
  const r = await q.query<{ group_id: number | null; user_id: number | null; added: boolean }>(
    `WITH g AS (SELECT id FROM groups WHERE name = $2), u AS (SELECT id FROM users WHERE id = $1),
     ins AS (INSERT INTO user_groups (user_id, group_id) SELECT u.id, g.id FROM u, g ON CONFLICT DO NOTHING RETURNING 1)
     SELECT (SELECT id FROM g) AS group_id, (SELECT id FROM u) AS user_id, EXISTS (SELECT 1 FROM ins) AS added`,
    [userId, name],
  );
  const row = r.rows[0];
  return row.group_id === null ? 'no_group' : row.user_id === null ? 'no_user' : row.added ? 'added' : 'already';
}

/** Takes a user out of a group: 'removed', 'not_member', or 'no_group'. */
export async function removeMember(q: Queryable, userId: number, name: string): Promise<'removed' | 'not_member' | 'no_group'> {
  const r = await q.query<{ group_id: number | null; removed: boolean }>(
    `WITH g AS (SELECT id FROM groups WHERE name = $2),
     del AS (DELETE FROM user_groups ug USING g WHERE ug.group_id = g.id AND ug.user_id = $1 RETURNING 1)
     SELECT (SELECT id FROM g) AS group_id, EXISTS (SELECT 1 FROM del) AS removed`,
    [userId, name],
  );
  const row = r.rows[0];
  return row.group_id === null ? 'no_group' : row.removed ? 'removed' : 'not_member';
}

/** The names of a user's groups, sorted. */
export async function groupsOfUser(q: Queryable, userId: number): Promise<string[]> {
  const r = await q.query<{ groups: string[] }>(`SELECT ${groupsOfSql('u')} AS groups FROM users u WHERE u.id = $1`, [userId]);
  return r.rows[0]?.groups ?? [];
}

/** The members of a group by username, sorted; null when there is no such group. */
export async function membersOf(q: Queryable, name: string): Promise<Array<{ id: number; username: string }> | null> {
  const r = await q.query<{ id: number | null; username: string | null }>(
    `SELECT u.id, u.username FROM groups g LEFT JOIN user_groups ug ON ug.group_id = g.id LEFT JOIN users u ON u.id = ug.user_id
      WHERE g.name = $1 ORDER BY u.username`,
    [name],
  );
  if (r.rows.length === 0) return null;
  return r.rows.filter((row) => row.id !== null).map((row) => ({ id: row.id!, username: row.username! }));
}

/**
 * Whether the user may use the client by its current row and their current groups, and those
 * groups; `client: false` when there is no such client, `user: false` when no such active user.
 */
export async function accessOf(q: Queryable, userId: number, clientId: string): Promise<{ user: boolean; client: boolean; admitted: boolean; groups: string[] }> {
  const r = await q.query<{ user: boolean; client: boolean; admitted: boolean; groups: string[] | null }>(
    `SELECT u.id IS NOT NULL AS user, c.client_id IS NOT NULL AS client,
            coalesce(u.id IS NOT NULL AND c.client_id IS NOT NULL AND ${admitsSql('u', 'c')}, false) AS admitted,
            CASE WHEN u.id IS NOT NULL THEN ${groupsOfSql('u')} END AS groups
       FROM (SELECT 1) AS one
       LEFT JOIN users u ON u.id = $1 AND u.active
       LEFT JOIN clients c ON c.client_id = $2`,
    [userId, clientId],
  );
  const row = r.rows[0];
  return { user: row.user, client: row.client, admitted: row.admitted, groups: row.groups ?? [] };
}

/** The user's columns (USER_COLUMNS) of user row `u`, beside a client row that has some of the same names. */
const ACCOUNT_COLUMNS = USER_COLUMNS.split(', ').map((c) => `u.${c}`).join(', ');

/** One account asked for by accountsFor. */
export interface AccountKey {
  userId: number;
  clientId: string;
}

/**
 * For each (user id, client id) asked: the active user with this id, whether the client's access
 * rule admits them by the current rows (false when there is no such client) and their groups,
 * all in one statement: what OpenID Connect token issues read for their accounts
 * (src/oidc/service.ts), in the order asked; null where there is no such active user.
 */
export async function accountsFor(q: Queryable, keys: readonly AccountKey[]): Promise<Array<{ user: UserRecord; admitted: boolean; groups: string[] } | null>> {
  const r = await q.query<UserRecord & { admitted: boolean; groups: string[]; n: string }>(
    `SELECT k.n, ${ACCOUNT_COLUMNS},
            coalesce(c.client_id IS NOT NULL AND ${admitsSql('u', 'c')}, false) AS admitted, ${groupsOfSql('u')} AS groups
       FROM unnest($1::int[], $2::text[]) WITH ORDINALITY AS k (user_id, client_id, n)
       JOIN users u ON u.id = k.user_id AND u.active
       LEFT JOIN clients c ON c.client_id = k.client_id`,
    [keys.map((k) => k.userId), keys.map((k) => k.clientId)],
    { prepare: true },
  );
  const answers = new Array<{ user: UserRecord; admitted: boolean; groups: string[] } | null>(keys.length).fill(null);
  for (const { n, admitted, groups, ...user } of r.rows) answers[Number(n) - 1] = { user, admitted, groups };
  return answers;
}

/** The ids of the active clients this user may use, by name. */
export async function clientsForUser(q: Queryable, userId: number): Promise<Array<{ client_id: string; client_name: string; listed: boolean }>> {
  return (await q.query<{ client_id: string; client_name: string; listed: boolean }>(
    `SELECT c.client_id, c.client_name, c.listed FROM clients c JOIN users u ON u.id = $1
      WHERE c.active AND ${admitsSql('u', 'c')} ORDER BY lower(c.client_name), c.client_id`,
    [userId],
  )).rows;
}

/** How many active users each client admits, by client id. */
export async function admittedCounts(q: Queryable): Promise<Map<string, number>> {
  const r = await q.query<{ client_id: string; n: number }>(
    `SELECT c.client_id, (SELECT count(*)::int FROM users u WHERE u.active AND ${admitsSql('u', 'c')}) AS n FROM clients c`,
  );
  return new Map(r.rows.map((row) => [row.client_id, row.n]));
}
