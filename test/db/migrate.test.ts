import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.ts';
import { embeddedPaths, openDatabase } from '../../src/db/open.ts';
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
      expect(recorded.length > 0).toBeTruthy();
      expect([...applied].sort(), 'every migration applied by exactly one of the runs').toStrictEqual(recorded);
      expect(await migrate(t.db), 'nothing left to apply').toStrictEqual([]);
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
      await expect(migrate(t.db, dir)).rejects.toThrow();
      const b = await t.db.query(`SELECT to_regclass('b') IS NULL AS absent`);
      expect((b.rows[0] as { absent: boolean }).absent, 'the half of 0002 that ran was rolled back').toBe(true);
      const names = (await t.db.query<{ name: string }>('SELECT name FROM schema_migrations')).rows.map((r) => r.name);
      expect(names).toStrictEqual(['0001_ok.sql']);
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
      expect(await run()).toMatch(/^applied: 0001_foundation\.sql/);
      expect((await run()).trim()).toBe('the database is up to date');
    } finally {
      await t?.drop();
    }
  });
});

describe.skipIf(onPostgres && 'embedded only')('embedded database', () => {
  it('refuses a second service on the same data directory', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-lock-'));
    const first = await openDatabase({ DATA_DIR: dataDir, DATABASE_URL: undefined }, { serve: true });
    try {
      await expect(openDatabase({ DATA_DIR: dataDir, DATABASE_URL: undefined }, { serve: true })).rejects.toThrow(/in use by process/);
      // the command line connects through the first one's socket instead
      const viaSocket = await openDatabase({ DATA_DIR: dataDir, DATABASE_URL: undefined }, { serve: false });
      const r = await viaSocket.query<{ n: number }>('SELECT 41 + 1 AS n');
      expect(r.rows[0].n).toBe(42);
      await viaSocket.close();
    } finally {
      await first.close();
    }
    // after the first closes, the directory can be opened again, and the data persisted
    const again = await openDatabase({ DATA_DIR: dataDir, DATABASE_URL: undefined }, { serve: true });
    await again.close();
  });

  it('refuses, naming DATA_DIR, a data directory whose socket path would not fit a Unix socket', async () => {
    const base = await mkdtemp(path.join(os.tmpdir(), 'auth-long-'));
    const dataDir = path.join(base, 'd'.repeat(100 - base.length - 1));
    await expect(openDatabase({ DATA_DIR: dataDir, DATABASE_URL: undefined }, { serve: true })).rejects.toThrow(/too long for the embedded database's socket.*choose a shorter DATA_DIR/);
    // a command alone opens the files itself: no socket needed
    const alone = await openDatabase({ DATA_DIR: dataDir, DATABASE_URL: undefined }, { serve: false });
    expect((await alone.query<{ n: number }>('SELECT 1 AS n')).rows[0].n).toBe(1);
    await alone.close();
  });

  it('tells a command that another command holds the database (no socket served), instead of a socket error', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-lock-'));
    const other = await openDatabase({ DATA_DIR: dataDir, DATABASE_URL: undefined }, { serve: false });
    try {
      await expect(openDatabase({ DATA_DIR: dataDir, DATABASE_URL: undefined }, { serve: false }))
        .rejects.toThrow(new RegExp(`in use by process ${process.pid}, which does not serve it .*try again when it ends`));
    } finally {
      await other.close();
    }
  });

  it('takes over a lock and a takeover file left with its own pid by an earlier life of the same pid, or naming nobody', async () => {
    for (const takeoverHolds of [String(process.pid), '']) {
      const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-takeover-'));
      const { lock } = embeddedPaths(dataDir);
      await writeFile(lock, String(process.pid)); // a container's pid 1 killed mid-takeover, started again
      await writeFile(`${lock}.takeover`, takeoverHolds);
      const db = await openDatabase({ DATA_DIR: dataDir, DATABASE_URL: undefined }, { serve: false });
      expect(db.kind).toBe('embedded');
      await db.close();
    }
  });

  it('takes over a lock left with its own pid by an earlier life of the same pid (a container restarted after SIGKILL)', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-lock-'));
    await writeFile(embeddedPaths(dataDir).lock, String(process.pid));
    const db = await openDatabase({ DATA_DIR: dataDir, DATABASE_URL: undefined }, { serve: true });
    try {
      expect((await db.query<{ n: number }>('SELECT 1 AS n')).rows[0].n).toBe(1);
      // still refused while this process holds it
      await expect(openDatabase({ DATA_DIR: dataDir, DATABASE_URL: undefined }, { serve: true })).rejects.toThrow(/in use by process/);
    } finally {
      await db.close();
    }
  });
});
