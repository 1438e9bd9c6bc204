import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/open.ts';
import { startTestApp, TEST_ENV, type TestApp, unique } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { makeUser } from '../helpers/factories.ts';
import { projectWith, seed, type SeedClient, seedSql } from './support.ts';

/** Session settings in a seed file (SET, not SET LOCAL; as a dump's header has them): they must end with the run. */
const SESSION_SETTING = `SET DateStyle = 'SQL, DMY';
SET statement_timeout = 0;
SELECT pg_catalog.set_config('search_path', 'public, pg_catalog', false);
SET client_min_messages = warning;
`;

const SETTINGS = "SELECT current_setting('datestyle') AS datestyle, current_setting('statement_timeout') AS statement_timeout, current_setting('search_path') AS search_path, current_setting('client_min_messages') AS client_min_messages";

/**
 * While the service runs on the embedded database, `npm run seed` reaches it through the
 * socket, which shares the service's one PGlite session (src/db/open.ts). What a seed file
 * sets for its session must end with the run, not stay in the session the service uses.
 */
describe.skipIf(onPostgres)('a seed applied through the running service\'s socket', () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const fn of cleanup.reverse()) await fn();
  });

  it('does not leave a seed file\'s SET in the session the service goes on using', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-seed-session-'));
    const served = await openDatabase(loadConfig({ ...TEST_ENV, DATA_DIR: dataDir }), { serve: true });
    const app: TestApp = await startTestApp({ DATA_DIR: dataDir }, { db: served });
    cleanup.push(() => served.close());
    cleanup.push(() => app.stop());
    const { username } = await makeUser(app);
    const before = (await served.query<Record<string, string>>(SETTINGS)).rows[0];
    const c: SeedClient = { id: 'dumped-svc', name: 'From a dump', callback: 'https://dump.example/cb', ips: ['127.0.0.1'], secret: 'dumped-svc-secret' };
    const sql = SESSION_SETTING + seedSql([c]);
    const run = await seed({ config: { DATA_DIR: dataDir } }, await projectWith({ 'seeds/dump.sql': sql }), [], { DATA_DIR: dataDir });
    expect(run.code, run.stderr).toBe(0);

    const r = await app.http.post('/api/sso/token', { client_id: c.id, client_secret: c.secret, username }, { localAddress: '127.0.0.1' });
    expect(r.status, r.text).toBe(200);
    const now = await served.query<Record<string, string>>(SETTINGS);
    expect(now.rows[0]).toStrictEqual(before);
    expect(before.datestyle).toBe('ISO, MDY');
  });
});

describe('a seed file made from pg_dump (an empty search_path, the table named public.clients)', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());

  it('is applied: the checks and triggers of the clients table find what they call', async () => {
    const c: SeedClient = { id: unique('dumped-').toLowerCase(), name: 'From pg_dump', callback: 'https://dump.example/cb', ips: ['127.0.0.1'], secret: 'dumped-secret' };
    const sql = "SELECT pg_catalog.set_config('search_path', '', false);\n" + seedSql([c]).replace('INSERT INTO clients', 'INSERT INTO public.clients');
    const run = await seed(app, await projectWith({ 'dump.sql': sql }), ['dump.sql']);
    expect(run.code, run.stderr).toBe(0);
    const audit = await app.db.query<{ action: string }>('SELECT action FROM audit_log WHERE client_id = $1', [c.id]);
    expect(audit.rows.map((r) => r.action)).toStrictEqual(['client.create']);
  });
});
