import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { migrate, migrationChecksum, MigrationChecksumError } from '../../src/db/migrate.ts';
import { createInstance } from '../../src/service.ts';
import { createMigratedDatabase, TEST_ENV } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';

async function migrationsDir(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'auth-mig-sum-'));
  for (const [name, sql] of Object.entries(files)) await writeFile(path.join(dir, name), sql);
  return dir;
}

describe('migration checksums', () => {
  it('records each migration with its checksum and refuses one whose file changed after it was applied', async () => {
    const t = await createTestDatabase();
    try {
      const dir = await migrationsDir({ '0001_a.sql': 'CREATE TABLE a (x int);', '0002_b.sql': 'CREATE TABLE b (y int);' });
      expect(await migrate(t.db, dir)).toStrictEqual(['0001_a.sql', '0002_b.sql']);
      const rows = await t.db.query<{ name: string; checksum: string }>('SELECT name, checksum FROM schema_migrations ORDER BY name');
      expect(rows.rows.map((r) => r.checksum)).toStrictEqual([migrationChecksum('CREATE TABLE a (x int);'), migrationChecksum('CREATE TABLE b (y int);')]);

      await writeFile(path.join(dir, '0001_a.sql'), 'CREATE TABLE a (x bigint);');
      await writeFile(path.join(dir, '0003_c.sql'), 'CREATE TABLE c (z int);');
      const err = await migrate(t.db, dir).then(() => null, (e: Error) => e);
      expect(err).toBeInstanceOf(MigrationChecksumError);
      expect(err!.message).toMatch(/^Migration 0001_a\.sql was changed after it was applied .*new migration$/);
      expect(err!.message).not.toMatch(/\n/);
      const c = await t.db.query<{ absent: boolean }>(`SELECT to_regclass('c') IS NULL AS absent`);
      expect(c.rows[0].absent, 'nothing further was applied').toBe(true);
    } finally {
      await t.drop();
    }
  });

  it('treats a file whose line endings became CRLF as unchanged', async () => {
    const t = await createTestDatabase();
    try {
      const dir = await migrationsDir({ '0001_a.sql': 'CREATE TABLE a (\n  x int\n);\n' });
      await migrate(t.db, dir);
      await writeFile(path.join(dir, '0001_a.sql'), 'CREATE TABLE a (\r\n  x int\r\n);\r\n');
      expect(await migrate(t.db, dir)).toStrictEqual([]);
    } finally {
      await t.drop();
    }
  });

  it('records the checksums of a database migrated before checksums existed, then checks them', async () => {
    const t = await createTestDatabase();
    try {
      // the table as earlier versions made it, with one migration applied
      await t.db.exec(`CREATE TABLE schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());
        CREATE TABLE a (x int); INSERT INTO schema_migrations (name) VALUES ('0001_a.sql');`);
      const dir = await migrationsDir({ '0001_a.sql': 'CREATE TABLE a (x int);', '0002_b.sql': 'CREATE TABLE b (y int);' });
      expect(await migrate(t.db, dir), 'only the new migration is applied').toStrictEqual(['0002_b.sql']);
      const recorded = await t.db.query<{ checksum: string }>(`SELECT checksum FROM schema_migrations WHERE name = '0001_a.sql'`);
      expect(recorded.rows[0].checksum).toBe(migrationChecksum('CREATE TABLE a (x int);'));
      await writeFile(path.join(dir, '0001_a.sql'), '-- edited\nCREATE TABLE a (x int);');
      await expect(migrate(t.db, dir)).rejects.toThrow(MigrationChecksumError);
    } finally {
      await t.drop();
    }
  });

  it('stops the start of the service when an applied migration differs from its file', async () => {
    const t = await createMigratedDatabase();
    try {
      await t.db.query(`UPDATE schema_migrations SET checksum = $1 WHERE name = '0001_foundation.sql'`, [migrationChecksum('the file as it was applied')]);
      const config = loadConfig({ ...TEST_ENV, DATA_DIR: await mkdtemp(path.join(os.tmpdir(), 'auth-mig-sum-')) });
      await expect(createInstance(config, t.db, pino({ level: 'silent' }))).rejects.toThrow(/^Migration 0001_foundation\.sql was changed after it was applied/);
    } finally {
      await t.drop();
    }
  });
});
