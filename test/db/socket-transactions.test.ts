import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/open.ts';
import { startTestApp, TEST_ENV, type TestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { projectWith, seed, seedSql } from '../seeds/support.ts';

/**
 * With the service running on the embedded database, `npm run seed`, `npm run migrate` and the
 * writing admin commands reach it through the socket in DATA_DIR (src/db/open.ts) and do their
 * work in a transaction there. The service's own statements wait for that transaction to end
 * (socketFacade, src/db/embedded.ts): before, they ran inside it on PGlite's one session, and a
 * command that failed rolled back what the service had answered for (a token's use, so the
 * token validated twice). Found by a review helper. PostgreSQL gives every connection a
 * session of its own: nothing to test there.
 */
describe.skipIf(onPostgres)('a command\'s transaction through the embedded database\'s socket', () => {
  const cleanup: Array<() => Promise<unknown>> = [];
  afterAll(async () => {
    for (const fn of cleanup.reverse()) await fn().catch(() => {});
  });

  /** What `npm start` does (hold the data directory, serve the socket), and a command's way in. */
  async function serviceAndCommand() {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-socket-tx-'));
    const config = loadConfig({ ...TEST_ENV, DATA_DIR: dataDir });
    const served = await openDatabase(config, { serve: true });
    const app: TestApp = await startTestApp({ DATA_DIR: dataDir }, { db: served });
    cleanup.push(() => served.close(), () => app.stop());
    const command = await openDatabase(config, { serve: false });
    cleanup.push(() => command.close());
    const client = await makeClient(app);
    const user = await makeUser(app);
    return { config, dataDir, served, app, command, creds: { client_id: client.client_id, client_secret: client.client_secret }, username: user.username };
  }

  it('holds the service\'s statements until it ends: a failed command undoes nothing the service answered for', async () => {
    const { app, command, served, creds, username } = await serviceAndCommand();
    const opts = { localAddress: '127.0.0.1' };
    const issued = await app.http.post('/api/sso/token', { ...creds, username }, opts);
    expect(issued.status, issued.text).toBe(200);
    let validating!: Promise<{ status: number }>;
    let answeredDuring = false;
    const failing = command.transaction(async (tx) => {
      await tx.query("INSERT INTO audit_log (action, outcome, details) VALUES ('test.command_half', 'success', '{}')");
      // a validation arrives while the command's transaction is open...
      validating = app.http.post('/api/sso/validate', { ...creds, token: issued.body.token }, opts);
      await Promise.race([validating.then(() => { answeredDuring = true; }), new Promise((resolve) => setTimeout(resolve, 1500))]);
      // ...and the command fails: all of its transaction is rolled back
      throw new Error('seed file refused');
    });
    await expect(failing).rejects.toThrow('seed file refused');
    expect(answeredDuring, 'the validation waited for the command\'s transaction').toBe(false);
    expect((await validating).status, 'then it was served').toBe(200);
    const again = await app.http.post('/api/sso/validate', { ...creds, token: issued.body.token }, opts);
    expect(again.body, 'the token was used once and stays used').toMatchObject({ valid: false, error: 'token_already_used' });
    expect((await served.query<{ n: number }>("SELECT count(*)::int AS n FROM audit_log WHERE action = 'test.command_half'")).rows[0].n).toBe(0);
  });

  it('a seed run that fails while sign-ins complete leaves every token used once, and nothing of its own', async () => {
    const { app, config, dataDir, served, creds, username } = await serviceAndCommand();
    const opts = { localAddress: '127.0.0.1' };
    const project = await projectWith({
      'seeds/a.sql': seedSql([{ id: 'half-applied', name: 'Half', callback: 'https://h.example/cb', ips: ['127.0.0.1'], secret: 'a-secret-of-the-half-run' }]),
      'seeds/b.sql': 'SELECT 1/0;',
    });
    const used: string[] = [];
    let seeding = true;
    const signIns = (async () => {
      while (seeding) {
        const issued = await app.http.post('/api/sso/token', { ...creds, username }, opts);
        const r = await app.http.post('/api/sso/validate', { ...creds, token: issued.body.token }, opts);
        if (r.status === 200) used.push(issued.body.token);
      }
    })();
    const codes: number[] = [];
    for (let i = 0; i < 3; i++) codes.push((await seed({ config }, project, [], { DATA_DIR: dataDir })).code);
    seeding = false;
    await signIns;
    expect(codes).toStrictEqual([1, 1, 1]);
    expect(used.length).toBeGreaterThan(0);
    const twice: string[] = [];
    for (const token of used) {
      if ((await app.http.post('/api/sso/validate', { ...creds, token }, opts)).status === 200) twice.push(token);
    }
    expect(twice).toStrictEqual([]);
    expect((await served.query<{ n: number }>("SELECT count(*)::int AS n FROM clients WHERE client_id = 'half-applied'")).rows[0].n).toBe(0);
  });
});
