import { copyFile, mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.ts';
import { createTestDatabase } from '../helpers/db.ts';

const MIGRATIONS = fileURLToPath(new URL('../../migrations/', import.meta.url));
const HASH = 'a'.repeat(64);

/** migrations/0002_clients_as_sql.sql on a database whose clients were written before it. */
describe('the clients-as-SQL migration', () => {
  it('keeps valid rows as they are, repairs or deactivates invalid ones and audits what it changed', async () => {
    const t = await createTestDatabase();
    try {
      const before = await mkdtemp(path.join(os.tmpdir(), 'auth-mig-0001-'));
      await copyFile(path.join(MIGRATIONS, '0001_foundation.sql'), path.join(before, '0001_foundation.sql'));
      await migrate(t.db, before);
      const insert = (id: string, callback: string, ips: string[], hash = HASH) => t.db.query(
        'INSERT INTO clients (client_id, client_name, secret_hash, secret_last4, callback_url, allowed_ips) VALUES ($1, $1, $2, $3, $4, $5)',
        [id, hash, 'wxyz', callback, ips]);
      await insert('good', 'https://good.example/cb', ['127.0.0.1', '10.0.0.0/8']);
      await insert('junk-ips', 'https://ok.example/cb', ['localhost', ' 127.0.0.1', '10.0.0.0/33', '10.1.2.3/16']);
      await insert('bad-callback', 'javascript:alert(1)', ['127.0.0.1']);
      await insert('bad-hash', 'https://ok.example/cb', ['127.0.0.1'], 'h');

      expect(await migrate(t.db)).toContain('0002_clients_as_sql.sql');

      const rows = (await t.db.query<Record<string, unknown>>(
        'SELECT client_id, callback_url, allowed_ips, active, secret_hash = $1 AS same_hash, secret_last4 FROM clients ORDER BY client_id', [HASH])).rows;
      expect(rows).toStrictEqual([
        { client_id: 'bad-callback', callback_url: 'https://callback.invalid/', allowed_ips: ['127.0.0.1'], active: false, same_hash: true, secret_last4: 'wxyz' },
        { client_id: 'bad-hash', callback_url: 'https://ok.example/cb', allowed_ips: ['127.0.0.1'], active: false, same_hash: false, secret_last4: 'wxyz' },
        { client_id: 'good', callback_url: 'https://good.example/cb', allowed_ips: ['127.0.0.1', '10.0.0.0/8'], active: true, same_hash: true, secret_last4: 'wxyz' },
        { client_id: 'junk-ips', callback_url: 'https://ok.example/cb', allowed_ips: ['127.0.0.1', '10.1.0.0/16'], active: true, same_hash: true, secret_last4: 'wxyz' },
      ]);
      const audit = (await t.db.query<{ client_id: string; details: unknown }>(
        "SELECT client_id, details FROM audit_log WHERE action = 'client.update' ORDER BY client_id")).rows
        .map((r) => ({ ...r, details: typeof r.details === 'string' ? JSON.parse(r.details) : r.details }));
      expect(audit).toStrictEqual([
        { client_id: 'bad-callback', details: { via: 'migration', migration: '0002_clients_as_sql', previous_callback_url: 'javascript:alert(1)', deactivated: true } },
        { client_id: 'bad-hash', details: { via: 'migration', migration: '0002_clients_as_sql', secret_hash_replaced: true, deactivated: true } },
        { client_id: 'junk-ips', details: { via: 'migration', migration: '0002_clients_as_sql', dropped_allowed_ips: ['localhost', '10.0.0.0/33'] } },
      ]);
      // from now on the checks hold for every row
      await expect(t.db.query("UPDATE clients SET allowed_ips = '{localhost}' WHERE client_id = 'good'")).rejects.toThrow(/"localhost"/);
    } finally {
      await t.drop();
    }
  });
});
