import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { projectWith, seed } from '../seeds/support.ts';

/*
 * A seed file made from pg_dump empties the search_path and names the table public.clients
 * (test/seeds/session-settings.test.ts). The triggers that keep a client's tokens
 * (migrations/0021) name sso_tokens unqualified: their functions keep the search_path they
 * were created with, as the other clients triggers' do (migrations/0017).
 */
describe('a seed file made from pg_dump (an empty search_path) that changes a client_id or deletes a client (found by a review helper)', () => {
  let app: TestApp;
  beforeAll(async () => { app = await startTestApp(); });
  afterAll(() => app?.close());

  const dumped = (sql: string) => `SELECT pg_catalog.set_config('search_path', '', false);\n${sql}\n`;

  it('renames a client that no token names', async () => {
    const client = await makeClient(app);
    const to = unique('renamed-').toLowerCase();
    const run = await seed(app, await projectWith({ 'rename.sql': dumped(`UPDATE public.clients SET client_id = '${to}' WHERE client_id = '${client.client_id}';`) }), ['rename.sql']);
    expect([run.code, run.stderr]).toStrictEqual([0, '']);
  });

  it('refuses, with the trigger\'s own message, to rename a client that tokens name', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    await app.db.query(
      `INSERT INTO sso_tokens (jti, user_id, client_id, username, ip_address, issued_at, expires_at) VALUES (gen_random_uuid(), $1, $2, 'u', '127.0.0.1', now(), now() + interval '1 minute')`,
      [user.id, client.client_id]);
    const run = await seed(app, await projectWith({ 'rename.sql': dumped(`UPDATE public.clients SET client_id = 'other-${client.client_id}' WHERE client_id = '${client.client_id}';`) }), ['rename.sql']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('has issued tokens');
  });

  it('deletes a client (its tokens go with it)', async () => {
    const client = await makeClient(app);
    const run = await seed(app, await projectWith({ 'delete.sql': dumped(`DELETE FROM public.clients WHERE client_id = '${client.client_id}';`) }), ['delete.sql']);
    expect([run.code, run.stderr]).toStrictEqual([0, '']);
  });
});
