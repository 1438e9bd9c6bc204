import { describe, expect, it } from 'vitest';
import { createMigratedDatabase } from '../helpers/app.ts';

/*
 * sso_tokens keeps its users and clients by triggers on their side, not foreign keys
 * (migrations/0021_tokens_without_foreign_keys.sql): what ON DELETE CASCADE did, they do.
 */

type Migrated = Awaited<ReturnType<typeof createMigratedDatabase>>;

async function withOwners(run: (t: Migrated) => Promise<void>): Promise<void> {
  const t = await createMigratedDatabase();
  try {
    await t.db.exec(`
      INSERT INTO users (username, email, password_hash) VALUES ('ann', 'ann@example.com', 'x'), ('bob', 'bob@example.com', 'x'), ('cy', 'cy@example.com', 'x');
      INSERT INTO clients (client_id, client_name, secret_hash, callback_url)
        VALUES ('app-a', 'A', repeat('a', 64), 'https://a.example/cb'), ('app-b', 'B', repeat('b', 64), 'https://b.example/cb');
      INSERT INTO sso_tokens (jti, user_id, client_id, username, ip_address, issued_at, expires_at, used_at)
        SELECT gen_random_uuid(), u.id, c.client_id, u.username, '127.0.0.1', now(), now() + interval '1 minute', CASE WHEN n = 2 THEN now() END
        FROM users u, clients c, generate_series(1, 2) n;`);
    await run(t);
  } finally {
    await t.drop();
  }
}

/** Tokens per owner, as 'user/client' → count. */
async function tokensByOwner(t: Migrated): Promise<Record<string, number>> {
  const r = await t.db.query<{ owner: string; n: number }>(
    `SELECT coalesce(u.username, '?' || t.user_id) || '/' || t.client_id AS owner, count(*)::int AS n
       FROM sso_tokens t LEFT JOIN users u ON u.id = t.user_id GROUP BY 1 ORDER BY 1`);
  return Object.fromEntries(r.rows.map((row) => [row.owner, row.n]));
}

describe('issued tokens go with their user and their client', () => {
  it('has no foreign keys on the token table (each locked the client row for every token issued)', async () => {
    await withOwners(async (t) => {
      const r = await t.db.query(`SELECT conname FROM pg_constraint WHERE conrelid = 'sso_tokens'::regclass AND contype = 'f'`);
      expect(r.rows).toStrictEqual([]);
    });
  });

  it('deletes a deleted client\'s tokens, used or not, in the same statement, and no one else\'s', async () => {
    await withOwners(async (t) => {
      expect(await tokensByOwner(t)).toStrictEqual({ 'ann/app-a': 2, 'ann/app-b': 2, 'bob/app-a': 2, 'bob/app-b': 2, 'cy/app-a': 2, 'cy/app-b': 2 });
      await t.db.exec(`DELETE FROM user_client_links WHERE client_id = 'app-a'; DELETE FROM clients WHERE client_id = 'app-a'`);
      expect(await tokensByOwner(t)).toStrictEqual({ 'ann/app-b': 2, 'bob/app-b': 2, 'cy/app-b': 2 });
    });
  });

  it('deletes deleted users\' tokens, several users in one statement', async () => {
    await withOwners(async (t) => {
      await t.db.exec(`DELETE FROM users WHERE username IN ('ann', 'cy')`);
      expect(await tokensByOwner(t)).toStrictEqual({ 'bob/app-a': 2, 'bob/app-b': 2 });
    });
  });

  it('keeps the tokens when a delete is rolled back', async () => {
    await withOwners(async (t) => {
      await expect(t.db.transaction(async (tx) => {
        await tx.query(`DELETE FROM users WHERE username = 'bob'`);
        throw new Error('changed my mind');
      })).rejects.toThrow('changed my mind');
      expect(await tokensByOwner(t)).toMatchObject({ 'bob/app-a': 2, 'bob/app-b': 2 });
    });
  });

  it('empties the tokens on TRUNCATE of users or of clients (CASCADE emptied them through the keys)', async () => {
    for (const table of ['users', 'clients']) {
      await withOwners(async (t) => {
        await t.db.exec(`TRUNCATE ${table} CASCADE`);
        expect(await tokensByOwner(t), table).toStrictEqual({});
      });
    }
  });

  it('refuses to change a client_id that tokens name (a client registered later under it would inherit them), and allows it when none do', async () => {
    await withOwners(async (t) => {
      await expect(t.db.exec(`UPDATE clients SET client_id = 'app-c' WHERE client_id = 'app-a'`)).rejects.toThrow(/client app-a has issued tokens/);
      await t.db.exec(`DELETE FROM sso_tokens WHERE client_id = 'app-b'`);
      await t.db.exec(`UPDATE clients SET client_id = 'app-d' WHERE client_id = 'app-b'`);
      expect((await t.db.query(`SELECT client_id FROM clients ORDER BY 1`)).rows).toStrictEqual([{ client_id: 'app-a' }, { client_id: 'app-d' }]);
    });
  });

  it('runs every trigger function with the search_path it was created with (a seed from pg_dump empties it)', async () => {
    await withOwners(async (t) => {
      const r = await t.db.query<{ name: string }>(
        `SELECT DISTINCT p.proname AS name FROM pg_trigger tg JOIN pg_proc p ON p.oid = tg.tgfoid
          WHERE NOT tg.tgisinternal AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%') ORDER BY 1`);
      expect(r.rows.map((row) => row.name)).toStrictEqual([]);
    });
  });
});
