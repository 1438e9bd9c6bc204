import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/open.ts';
import { runSeed } from '../../src/seeds/run.ts';
import { startTestApp, TEST_ENV, type TestApp } from '../helpers/app.ts';
import { createTestDatabase, onPostgres } from '../helpers/db.ts';
import { makeUser } from '../helpers/factories.ts';
import { projectWith, seed, type SeedClient, seedSql } from './support.ts';

const client = (id: string): SeedClient => ({ id, name: 'Command line', callback: 'https://cmd.example/cb', ips: ['127.0.0.1'], secret: `${id}-secret` });

/** `npm run seed` opening the configured database itself, as the real command does. */
describe('npm run seed on the configured database', () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const fn of cleanup.reverse()) await fn();
  });

  it('applies with the service stopped (PostgreSQL by DATABASE_URL, the embedded database directly)', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-seed-data-'));
    const env: Record<string, string> = { DATA_DIR: dataDir };
    if (onPostgres) {
      const database = await createTestDatabase();
      await database.db.close();
      cleanup.push(() => database.drop());
      env.DATABASE_URL = database.url!;
    }
    const project = await projectWith({ 'seeds/clients.sql': seedSql([client('stopped-svc')]) });
    const run = await seed({ config: { DATA_DIR: dataDir } }, project, ['--json'], env);
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ files: ['seeds/clients.sql'], created: ['stopped-svc'], updated: [], deleted: [], unchanged: 0, webhooks: [] });
    expect(JSON.parse(run.stdout).clients).toMatchObject([{ client_id: 'stopped-svc', change: 'created', columns: { client_name: 'Command line', secret_hash: 'set' } }]);
  });

  it('applies while the service runs (the embedded database through its socket), which sees it at once', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-seed-live-'));
    let app: TestApp;
    let env: Record<string, string>;
    if (onPostgres) {
      app = await startTestApp({ DATA_DIR: dataDir });
      env = { DATA_DIR: dataDir, DATABASE_URL: app.databaseUrl! };
    } else {
      // the service's own opener: it holds the lock and serves the socket in DATA_DIR
      const served = await openDatabase(loadConfig({ ...TEST_ENV, DATA_DIR: dataDir }), { serve: true });
      app = await startTestApp({ DATA_DIR: dataDir }, { db: served });
      cleanup.push(() => served.close());
      env = { DATA_DIR: dataDir };
    }
    cleanup.push(() => app.close());
    const { username } = await makeUser(app);
    const c = client('live-svc');
    const run = await seed({ config: { DATA_DIR: dataDir } }, await projectWith({ 'seeds/live.sql': seedSql([c]) }), [], env);
    expect(run.code, run.stderr).toBe(0);
    const r = await app.http.post('/api/sso/token', { client_id: c.id, client_secret: c.secret, username }, { localAddress: '127.0.0.1' });
    expect(r.status).toBe(200);

    const bad = await seed({ config: { DATA_DIR: dataDir } }, await projectWith({ 'seeds/live.sql': seedSql([{ ...c, name: 'Not applied', ips: ['localhost'] }]) }), [], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('seeds/live.sql');
    expect(bad.stderr).toContain('"localhost"');
    const row = await app.db.query('SELECT client_name FROM clients WHERE client_id = $1', [c.id]);
    expect(row.rows).toStrictEqual([{ client_name: 'Command line' }]);
  });

  it('reads the project\'s .env like the service, and names on stderr the database it writes to', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-seed-env-'));
    const dotenv = [`DATA_DIR=${dataDir}`];
    if (onPostgres) {
      const database = await createTestDatabase();
      await database.db.close();
      cleanup.push(() => database.drop());
      dotenv.push(`DATABASE_URL=${database.url}`);
    }
    const project = await projectWith({ 'seeds/clients.sql': seedSql([client('from-dotenv')]), '.env': `${dotenv.join('\n')}\n` });
    let stderr = '';
    const { DATA_DIR: _unset, ...withoutDataDir } = TEST_ENV;
    const code = await runSeed([], { stdout: () => {}, stderr: (t) => void (stderr += t), env: { ...withoutDataDir }, cwd: project });
    expect(code, stderr).toBe(0);
    expect(stderr).toContain(onPostgres ? 'PostgreSQL database' : `embedded database in ${dataDir}`);
  });
});
