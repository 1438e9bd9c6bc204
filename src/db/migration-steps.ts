import { normalizeUsername } from '../validation/username.ts';
import type { Queryable } from './db.ts';

/**
 * What a migration needs done that SQL cannot do, run by migrate (src/db/migrate.ts) right
 * after that migration's file, in its transaction: applied together or not at all. Keyed by
 * the file's name.
 */
export const MIGRATION_STEPS: Readonly<Record<string, (tx: Queryable) => Promise<void>>> = {
  '0014_name_keys_and_event_locks.sql': rekeyLinkNames,
};

/**
 * The keys of names linked before 0014 were the database's lower(); they become the service's
 * normalizeUsername. Only names outside printable ASCII can differ (the two agree on ASCII,
 * and link names hold no control characters). A link whose new key is another user's link at
 * the same client, or another user's username, has no provable holder: it is removed and
 * audited, as 0003 did with names claimed twice, and its user links again.
 */
/** A migration's statements run as long as its data needs: no read bound (migrations lift the server's too). */
const UNBOUNDED = { unbounded: true } as const;

async function rekeyLinkNames(tx: Queryable): Promise<void> {
  const rows = (await tx.query<{ user_id: number; client_id: string; external_username: string; username_key: string }>(
    "SELECT user_id, client_id, external_username, username_key FROM user_client_links WHERE external_username ~ '[^ -~]'", [], UNBOUNDED,
  )).rows.map((r) => ({ ...r, key: normalizeUsername(r.external_username) })).filter((r) => r.key !== r.username_key);
  if (rows.length === 0) return;
  const fix = [rows.map((r) => r.user_id), rows.map((r) => r.client_id), rows.map((r) => r.key)];
  await tx.query(
    `WITH fix AS (
       SELECT * FROM unnest($1::int[], $2::text[], $3::text[]) AS f(user_id, client_id, key)
     ), keyed AS (
       SELECT l.user_id, l.client_id, l.external_username, coalesce(f.key, l.username_key) AS key
         FROM user_client_links l LEFT JOIN fix f USING (user_id, client_id)
        WHERE l.client_id IN (SELECT client_id FROM fix)
     ), contested AS (
       SELECT k.*, EXISTS (SELECT 1 FROM users u WHERE u.username = k.key AND u.id <> k.user_id) AS users_name
         FROM keyed k
        WHERE EXISTS (SELECT 1 FROM keyed o WHERE o.client_id = k.client_id AND o.key = k.key AND o.user_id <> k.user_id)
           OR EXISTS (SELECT 1 FROM users u WHERE u.username = k.key AND u.id <> k.user_id)
     ), removed AS (
       DELETE FROM user_client_links l USING contested c WHERE l.user_id = c.user_id AND l.client_id = c.client_id
     )
     INSERT INTO audit_log (action, outcome, user_id, username, client_id, details)
     SELECT 'user.link_revoke', 'success', c.user_id, u.username, c.client_id,
            jsonb_build_object('via', 'migration', 'external_username', c.external_username,
              'reason', CASE WHEN c.users_name THEN 'name_is_another_users_username' ELSE 'name_claimed_twice' END)
       FROM contested c JOIN users u ON u.id = c.user_id`,
    fix, UNBOUNDED,
  );
  // in two steps, so that no row's new key meets another's old one on the unique index: first
  // a key no name has (a control character, then the user's id, unique at a client), then the new one
  await tx.query(
    `UPDATE user_client_links l SET username_key = chr(1) || l.user_id
       FROM unnest($1::int[], $2::text[]) AS f(user_id, client_id) WHERE l.user_id = f.user_id AND l.client_id = f.client_id`,
    fix.slice(0, 2), UNBOUNDED,
  );
  await tx.query(
    `UPDATE user_client_links l SET username_key = f.key
       FROM unnest($1::int[], $2::text[], $3::text[]) AS f(user_id, client_id, key) WHERE l.user_id = f.user_id AND l.client_id = f.client_id`,
    fix, UNBOUNDED,
  );
}
