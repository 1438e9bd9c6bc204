import { copyFile, mkdtemp } from 'node:fs/promises';
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
