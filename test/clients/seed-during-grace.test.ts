import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditOf } from '../admin/support.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { admin } from '../helpers/cli.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { projectWith, seed, seedSql } from '../seeds/support.ts';

/**
 * docs/clients-as-code.md: "only the service's own rotation (the replaced secret kept, or none)
 * stays client.rotate_secret"; any other state of the previous secret is named. A seed (or
 * psql) that replaces the secret while an earlier grace runs leaves a previous secret that is
 * neither: the secret it replaced stops at once, and an older one keeps working.
 */
describe('a secret replaced by a seed while a grace runs', () => {
  let app: TestApp;
  let username: string;
  beforeAll(async () => {
    app = await startTestApp();
    username = (await makeUser(app)).username;
  });
  afterAll(() => app?.close());

  const works = async (clientId: string, secret: string) =>
    (await app.http.post('/api/sso/token', { client_id: clientId, client_secret: secret, username })).status === 200;

  it('is not audited as a rotation that keeps the replaced secret, and names the older secret still accepted', async () => {
    const client = await makeClient(app);
    const s1 = client.client_secret;
    const cli = await admin(app, ['client', 'rotate-secret', client.client_id, '--grace-seconds', '3600', '--json']);
    expect(cli.code, cli.stderr).toBe(0);
    const s2 = JSON.parse(cli.stdout).client_secret as string;

    const s3 = 'a-third-secret-put-in-the-seed-file-0123456789';
    const run = await seed(app, await projectWith({ 'clients.sql': seedSql([{
      id: client.client_id, name: client.client_name, callback: client.callback_url, ips: ['127.0.0.1', '::1'], secret: s3,
    }]) }), ['clients.sql']);
    expect(run.code, run.stderr).toBe(0);
    expect(await works(client.client_id, s3)).toBe(true);
    expect(await works(client.client_id, s2), 'the secret the seed replaced').toBe(false);
    expect(await works(client.client_id, s1), 'the older secret, still in its grace').toBe(true);

    const entries = [...await auditOf(app, 'client.rotate_secret'), ...await auditOf(app, 'client.update')]
      .filter((a) => a.client_id === client.client_id && a.details.via === 'seed');
    expect(entries).toHaveLength(1);
    // what the entry must not say: "rotation, the replaced secret accepted until ..."
    expect(entries[0].details.changed, JSON.stringify(entries[0].details)).toStrictEqual({ secret: 'replaced', previous_secret: 'older one kept' });
    expect(await auditOf(app, 'client.update').then((rows) => rows.filter((a) => a.client_id === client.client_id))).toHaveLength(1);
  });
});
