import { copyFile, mkdtemp, readdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.ts';
import { createTestDatabase } from '../helpers/db.ts';

const MIGRATIONS = fileURLToPath(new URL('../../migrations/', import.meta.url));

describe('migration 0003_proven_links', () => {
  it('makes every existing link pending, removes names claimed twice (audited) and the unused tokens that carry a linked name', async () => {
    const t = await createTestDatabase();
    const dir = await mkdtemp(path.join(os.tmpdir(), 'auth-links-mig-'));
    try {
      await copyFile(path.join(MIGRATIONS, '0001_foundation.sql'), path.join(dir, '0001_foundation.sql'));
      await migrate(t.db, dir);
      const ids = (await t.db.query<{ id: number }>(
        `INSERT INTO users (username, email, password_hash) VALUES ('ann', 'a@x', 'h'), ('bob', 'b@x', 'h'), ('cid', 'c@x', 'h') RETURNING id`)).rows.map((r) => r.id);
      const [ann, bob, cid] = ids;
      await t.db.query(`INSERT INTO clients (client_id, client_name, secret_hash, secret_last4, callback_url)
        VALUES ('shop', 'Shop', 'h', 'abcd', 'https://shop.example/cb'), ('wiki', 'Wiki', 'h', 'abcd', 'https://wiki.example/cb')`);
      // before the change, anyone could link any name: ann and bob both claimed the shop's "Boss"
      await t.db.query(`INSERT INTO user_client_links (user_id, client_id, external_username) VALUES
        ($1, 'shop', 'Boss'), ($2, 'shop', 'boss'), ($3, 'shop', 'cid.shop'), ($1, 'wiki', 'boss')`, [ann, bob, cid]);
      await t.db.query(`INSERT INTO sso_tokens (jti, user_id, client_id, username, ip_address, issued_at, expires_at) VALUES
        ('00000000-0000-4000-8000-000000000001', $1, 'shop', 'cid.shop', '127.0.0.1', now(), now() + interval '1 minute'),
        ('00000000-0000-4000-8000-000000000002', $1, 'shop', 'cid', '127.0.0.1', now(), now() + interval '1 minute')`, [cid]);

      await copyFile(path.join(MIGRATIONS, '0003_proven_links.sql'), path.join(dir, '0003_proven_links.sql'));
      expect(await migrate(t.db, dir)).toStrictEqual(['0003_proven_links.sql']);

      const links = await t.db.query(`SELECT user_id, client_id, external_username, status, username_key FROM user_client_links ORDER BY user_id, client_id`);
      expect(links.rows).toStrictEqual([
        { user_id: ann, client_id: 'wiki', external_username: 'boss', status: 'pending', username_key: 'boss' },
        { user_id: cid, client_id: 'shop', external_username: 'cid.shop', status: 'pending', username_key: 'cid.shop' },
      ]);
      const audit = await t.db.query<{ user_id: number; client_id: string; details: any }>(
        `SELECT user_id, client_id, details FROM audit_log WHERE action = 'user.link_revoke' ORDER BY user_id`);
      expect(audit.rows.map((r) => [r.user_id, r.client_id, (typeof r.details === 'string' ? JSON.parse(r.details) : r.details).reason]))
        .toStrictEqual([[ann, 'shop', 'name_claimed_twice'], [bob, 'shop', 'name_claimed_twice']]);
      const tokens = await t.db.query<{ username: string; invalidated: boolean }>(
        `SELECT username, invalidated_at IS NOT NULL AS invalidated FROM sso_tokens ORDER BY jti`);
      expect(tokens.rows).toStrictEqual([{ username: 'cid.shop', invalidated: true }, { username: 'cid', invalidated: false }]);

      // from now on the database refuses a second holder of a name, however it is spelled
      await expect(t.db.query(`INSERT INTO user_client_links (user_id, client_id, external_username) VALUES ($1, 'shop', ' CID.SHOP')`, [bob]))
        .rejects.toThrow(/user_client_links_name/);
    } finally {
      await t.drop();
    }
  });
});

describe('migration 0014_name_keys_and_event_locks', () => {
  it('keys linked names as usernames are normalized, removing (audited) those that become another\'s', async () => {
    const t = await createTestDatabase();
    const dir = await mkdtemp(path.join(os.tmpdir(), 'auth-links-mig-'));
    const NAME = '0014_name_keys_and_event_locks.sql';
    try {
      for (const f of (await readdir(MIGRATIONS)).filter((f) => f.endsWith('.sql') && f < NAME)) await copyFile(path.join(MIGRATIONS, f), path.join(dir, f));
      await migrate(t.db, dir);
      const [ann, bob, cid, dan] = (await t.db.query<{ id: number }>(
        `INSERT INTO users (username, email, password_hash) VALUES ('ann', 'a@x', 'h'), ('bob', 'b@x', 'h'), ('cid', 'c@x', 'h'), ('dan', 'd@x', 'h'), ('σοφος', 's@x', 'h') RETURNING id`,
      )).rows.map((r) => r.id);
      await t.db.query(`INSERT INTO clients (client_id, client_name, secret_hash, callback_url)
        VALUES ('shop', 'Shop', repeat('a', 64), 'https://shop.example/cb'), ('wiki', 'Wiki', repeat('b', 64), 'https://wiki.example/cb')`);
      // keyed by the database's lower(): ΣΟΦΟΣ was not σοφος's username, ΛΟΓΟΣ and λογος two names
      await t.db.query(`INSERT INTO user_client_links (user_id, client_id, external_username, status) VALUES
        ($1, 'shop', 'ΣΟΦΟΣ', 'active'), ($2, 'shop', 'ΛΟΓΟΣ', 'active'), ($3, 'shop', 'λογος', 'pending'), ($4, 'wiki', 'ΑΛΦΑΣ', 'active'), ($1, 'wiki', 'Plain', 'active')`,
      [ann, bob, cid, dan]);
      expect((await t.db.query<{ k: string }>("SELECT username_key AS k FROM user_client_links WHERE external_username = 'ΑΛΦΑΣ'")).rows[0].k).toBe('αλφασ');

      await copyFile(path.join(MIGRATIONS, NAME), path.join(dir, NAME));
      expect(await migrate(t.db, dir)).toStrictEqual([NAME]);

      const links = await t.db.query(`SELECT user_id, client_id, external_username, status, username_key FROM user_client_links ORDER BY user_id, client_id`);
      expect(links.rows).toStrictEqual([
        { user_id: ann, client_id: 'wiki', external_username: 'Plain', status: 'active', username_key: 'plain' },
        { user_id: dan, client_id: 'wiki', external_username: 'ΑΛΦΑΣ', status: 'active', username_key: 'αλφας' },
      ]);
      const audit = await t.db.query<{ user_id: number; client_id: string; details: any }>(
        `SELECT user_id, client_id, details FROM audit_log WHERE action = 'user.link_revoke' ORDER BY user_id`);
      expect(audit.rows.map((r) => [r.user_id, r.client_id, (typeof r.details === 'string' ? JSON.parse(r.details) : r.details)]))
        .toStrictEqual([
          [ann, 'shop', { via: 'migration', reason: 'name_is_another_users_username', external_username: 'ΣΟΦΟΣ' }],
          [bob, 'shop', { via: 'migration', reason: 'name_claimed_twice', external_username: 'ΛΟΓΟΣ' }],
          [cid, 'shop', { via: 'migration', reason: 'name_claimed_twice', external_username: 'λογος' }],
        ]);
      // the key is the service's to write now: a row without one is refused
      await expect(t.db.query(`INSERT INTO user_client_links (user_id, client_id, external_username) VALUES ($1, 'shop', 'x')`, [dan]))
        .rejects.toThrow(/username_key/);
    } finally {
      await t.drop();
    }
  });
});
