import assert from 'node:assert/strict';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { migrate } from '../../src/db/migrate.ts';
import { openDatabase } from '../../src/db/open.ts';
import { openPostgres } from '../../src/db/postgres.ts';
import { createTestDatabase, onPostgres } from '../helpers/db.ts';

describe('migrations', () => {
  it('applies each migration once, even when several instances start at once', async () => {
    const t = await createTestDatabase();
    try {
      const others = onPostgres ? [openPostgres(t.url!), openPostgres(t.url!), openPostgres(t.url!)] : [t.db, t.db, t.db];
      const runs = await Promise.all([migrate(t.db), ...others.map((db) => migrate(db))]);
      const applied = runs.flat();
      const recorded = (await t.db.query<{ name: string }>('SELECT name FROM schema_migrations ORDER BY name')).rows.map((r) => r.name);
      assert.ok(recorded.length > 0);
      assert.deepEqual([...applied].sort(), recorded, 'every migration applied by exactly one of the runs');
      assert.deepEqual(await migrate(t.db), [], 'nothing left to apply');
      if (onPostgres) await Promise.all(others.map((db) => db.close()));
    } finally {
      await t.drop();
    }
  });

  it('rolls a failing migration back whole and records nothing', async () => {
    const t = await createTestDatabase();
    const dir = await mkdtemp(path.join(os.tmpdir(), 'auth-mig-'));
    const { writeFile } = await import('node:fs/promises');
    await writeFile(path.join(dir, '0001_ok.sql'), 'CREATE TABLE a (x int);');
    await writeFile(path.join(dir, '0002_bad.sql'), 'CREATE TABLE b (y int); INSERT INTO nowhere VALUES (1);');
    try {
      await assert.rejects(migrate(t.db, dir));
      const b = await t.db.query(`SELECT to_regclass('b') IS NULL AS absent`);
      assert.equal((b.rows[0] as { absent: boolean }).absent, true, 'the half of 0002 that ran was rolled back');
      const names = (await t.db.query<{ name: string }>('SELECT name FROM schema_migrations')).rows.map((r) => r.name);
      assert.deepEqual(names, ['0001_ok.sql']);
    } finally {
      await t.drop();
    }
  });
});

describe('npm run migrate', () => {
  it('applies pending migrations once and then reports the database up to date', async () => {
    const { execFile } = await import('node:child_process');
    const { ROOT } = await import('../helpers/processes.ts');
    const t = onPostgres ? await createTestDatabase() : undefined;
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-migrate-'));
    const env = { ...process.env, DATABASE_URL: t?.url ?? '', DATA_DIR: dataDir };
    const run = () => new Promise<string>((resolve, reject) => {
      execFile(process.execPath, ['--import', 'tsx', 'src/db/migrate-cli.ts'], { cwd: ROOT, env }, (err, stdout, stderr) => (err ? reject(new Error(stderr)) : resolve(stdout)));
    });
    try {
      assert.match(await run(), /^applied: 0001_foundation\.sql/);
      assert.equal((await run()).trim(), 'the database is up to date');
    } finally {
      await t?.drop();
    }
  });
});

describe('embedded database', { skip: onPostgres && 'embedded only' }, () => {
  it('refuses a second service on the same data directory', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-lock-'));
    const first = await openDatabase({ DATA_DIR: dataDir, DATABASE_URL: undefined }, { serve: true });
    try {
      await assert.rejects(openDatabase({ DATA_DIR: dataDir, DATABASE_URL: undefined }, { serve: true }), /in use by process/);
      // the command line connects through the first one's socket instead
      const viaSocket = await openDatabase({ DATA_DIR: dataDir, DATABASE_URL: undefined }, { serve: false });
      const r = await viaSocket.query<{ n: number }>('SELECT 41 + 1 AS n');
      assert.equal(r.rows[0].n, 42);
      await viaSocket.close();
    } finally {
      await first.close();
    }
    // after the first closes, the directory can be opened again, and the data persisted
    const again = await openDatabase({ DATA_DIR: dataDir, DATABASE_URL: undefined }, { serve: true });
    await again.close();
  });
});
