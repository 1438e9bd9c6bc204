import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashClientSecret } from '../../src/clients/credentials.ts';
import { auditOf, signedIn, type SignedIn } from '../admin/support.ts';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { admin } from '../helpers/cli.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';
import { eventually } from '../webhooks/receiver.ts';

/** Client secret rotation with a grace period: CLI, admin API and panel. */
describe('client secret rotation', () => {
  let app: TestApp;
  let user: Awaited<ReturnType<typeof makeUser>>;
  let administrator: SignedIn;
  beforeAll(async () => {
    app = await startTestApp();
    user = await makeUser(app);
    administrator = await signedIn(app, 'admin');
  });
  afterAll(() => app?.close());

  /** Whether this client id and secret obtain a token. */
  const works = async (clientId: string, secret: string) => {
    const r = await app.http.post('/api/sso/token', { client_id: clientId, client_secret: secret, username: user.username });
    if (r.status !== 200) expect(r.body.error, r.text).toBe('invalid_client');
    return r.status === 200;
  };
  const rotateByCli = async (clientId: string, extra: string[] = []) => {
    const r = await admin(app, ['client', 'rotate-secret', clientId, ...extra, '--json']);
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as { client_id: string; client_secret: string; previous_secret_expires_at: string | null };
  };

  it('keeps the old secret working during the grace given on the command line, and audits rotation and grace', async () => {
    const client = await makeClient(app);
    const startedAt = Date.now();
    const rotated = await rotateByCli(client.client_id, ['--grace-seconds', '3600']);
    expect(rotated.client_secret).not.toBe(client.client_secret);
    const until = Date.parse(rotated.previous_secret_expires_at!);
    expect(until - startedAt).toBeGreaterThan(3500_000);
    expect(until - startedAt).toBeLessThan(3700_000);
    expect(await works(client.client_id, client.client_secret), 'old secret during the grace').toBe(true);
    expect(await works(client.client_id, rotated.client_secret), 'new secret').toBe(true);
    const [audit] = (await auditOf(app, 'client.rotate_secret')).filter((a) => a.client_id === client.client_id);
    expect(audit.details).toMatchObject({ via: 'cli', grace_seconds: 3600, previous_secret_expires_at: rotated.previous_secret_expires_at });
    expect(JSON.stringify(audit.details)).not.toContain(rotated.client_secret);
  });

  it('stores the previous secret hashed, like the current one', async () => {
    const client = await makeClient(app);
    await rotateByCli(client.client_id, ['--grace-seconds', '600']);
    const row = (await app.db.query<{ previous_secret_hash: string; previous_secret_expires_at: Date }>(
      'SELECT previous_secret_hash, previous_secret_expires_at FROM clients WHERE client_id = $1', [client.client_id])).rows[0];
    expect(row.previous_secret_hash).toBe(hashClientSecret(client.client_secret));
    expect(row.previous_secret_expires_at).not.toBe(null);
  });

  it('accepts only the new secret once the grace has ended, by the database clock', async () => {
    const client = await makeClient(app);
    const rotated = await rotateByCli(client.client_id, ['--grace-seconds', '2']);
    expect(await works(client.client_id, rotated.client_secret)).toBe(true);
    await eventually(async () => !(await works(client.client_id, client.client_secret)), 15_000, 'the old secret to expire');
    const now = (await app.db.query<{ now: Date }>('SELECT now() AS now')).rows[0].now;
    expect(new Date(now).getTime(), 'refused only after its expiry').toBeGreaterThanOrEqual(Date.parse(rotated.previous_secret_expires_at!));
    expect(await works(client.client_id, rotated.client_secret)).toBe(true);
  });

  it('without a grace the old secret fails at once, as before', async () => {
    const client = await makeClient(app);
    const rotated = await rotateByCli(client.client_id);
    expect(rotated.previous_secret_expires_at).toBe(null);
    expect(await works(client.client_id, client.client_secret)).toBe(false);
    expect(await works(client.client_id, rotated.client_secret)).toBe(true);
    const [audit] = (await auditOf(app, 'client.rotate_secret')).filter((a) => a.client_id === client.client_id);
    expect(audit.details.grace_seconds).toBe(0);
  });

  it('refuses a second rotation with a grace while one runs, so the secret still in use is never dropped', async () => {
    const client = await makeClient(app);
    const second = await rotateByCli(client.client_id, ['--grace-seconds', '600']);
    const again = await admin(app, ['client', 'rotate-secret', client.client_id, '--grace-seconds', '600', '--json']);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toMatch(/still accepted until/);
    const viaApi = await app.services.clients.rotateSecret(client.client_id, { via: 'cli' }, { graceSeconds: 60 }).catch((e: { code?: string }) => e.code);
    expect(viaApi).toBe('rotation_in_progress');
    expect(await works(client.client_id, client.client_secret), 'the original secret still works').toBe(true);
    expect(await works(client.client_id, second.client_secret)).toBe(true);
    // a rotation without grace (a leaked secret) still goes through and ends the grace at once
    const third = await rotateByCli(client.client_id);
    expect(await works(client.client_id, client.client_secret)).toBe(false);
    expect(await works(client.client_id, second.client_secret)).toBe(false);
    expect(await works(client.client_id, third.client_secret)).toBe(true);
  });

  it('refuses a malformed or too long grace on the command line', async () => {
    const client = await makeClient(app);
    for (const bad of ['-5', 'soon', '1.5']) {
      const r = await admin(app, ['client', 'rotate-secret', client.client_id, '--grace-seconds', bad]);
      expect(r.code, `${bad}: a usage error`).toBe(2);
    }
    const tooLong = await admin(app, ['client', 'rotate-secret', client.client_id, '--grace-seconds', '99999999']);
    expect(tooLong.code).toBe(1);
    expect(tooLong.stderr).toMatch(/grace_seconds/);
    expect(await works(client.client_id, client.client_secret), 'nothing was rotated').toBe(true);
  });

  it('lets one of two rotations with a grace at once through; the other is 409 and the first secret keeps working', async () => {
    for (let round = 0; round < 5; round++) {
      const client = await makeClient(app);
      const path = `/api/admin/clients/${client.client_id}/rotate-secret`;
      const both = await Promise.all([app.http.post(path, { grace_seconds: 3600 }, administrator.as), app.http.post(path, { grace_seconds: 3600 }, administrator.as)]);
      expect(both.map((r) => r.status).sort(), both.map((r) => r.text).join('\n')).toStrictEqual([200, 409]);
      expect(both.find((r) => r.status === 409)!.body.error).toBe('rotation_in_progress');
      expect(await works(client.client_id, client.client_secret), 'the original secret, in its grace').toBe(true);
      expect(await works(client.client_id, both.find((r) => r.status === 200)!.body.client_secret)).toBe(true);
    }
  });

  it('takes grace_seconds in the body of the admin API', async () => {
    const client = await makeClient(app);
    const path = `/api/admin/clients/${client.client_id}/rotate-secret`;
    for (const bad of [{ grace_seconds: -1 }, { grace_seconds: 'an hour' }, { grace_seconds: 2.5 }, { grace_seconds: 99999999 }, { grace: 5 }]) {
      const r = await app.http.post(path, bad, administrator.as);
      expect(r.status, JSON.stringify(bad)).toBe(400);
      expect(r.body.error).toBe('validation_error');
    }
    const r = await app.http.post(path, { grace_seconds: 600 }, administrator.as);
    expect(r.status, r.text).toBe(200);
    expect(Object.keys(r.body).sort()).toStrictEqual(['client_id', 'client_secret', 'previous_secret_expires_at']);
    expect(await works(client.client_id, client.client_secret)).toBe(true);
    expect(await works(client.client_id, r.body.client_secret)).toBe(true);
    const shown = await app.http.get(`/api/admin/clients/${client.client_id}`, administrator.as);
    expect(shown.body.previous_secret_expires_at, 'the client shows until when the old secret works').toBe(r.body.previous_secret_expires_at);
    const [audit] = (await auditOf(app, 'client.rotate_secret')).filter((a) => a.client_id === client.client_id);
    expect(audit.details).toMatchObject({ via: 'admin_api', grace_seconds: 600 });
    // an empty body is still a rotation without grace
    const plain = await app.http.post(path, undefined, administrator.as);
    expect(plain.status, plain.text).toBe(200);
    expect(plain.body.previous_secret_expires_at).toBe(null);
    expect(await works(client.client_id, r.body.client_secret)).toBe(false);
    expect(await works(client.client_id, plain.body.client_secret)).toBe(true);
    expect((await app.http.get(`/api/admin/clients/${client.client_id}`, administrator.as)).body.previous_secret_expires_at).toBe(null);
  });

  it('offers the grace in the panel\'s regenerate form and shows until when the old secret works', async () => {
    const client = await makeClient(app);
    const s = formSession(await app.listen());
    const login = await s.get('/login');
    const signed = await s.post('/login', { _csrf: hiddenField(login.text, '_csrf'), step: 'password', login: administrator.user.username, password: administrator.user.password });
    expect(signed.status).toBe(303);
    const confirm = await s.get(`/admin/clients/${client.client_id}/regenerate`);
    expect(confirm.text).toMatch(/name="grace_seconds"/);
    const done = await s.post(`/admin/clients/${client.client_id}/regenerate`, { _csrf: hiddenField(confirm.text, '_csrf'), grace_seconds: '3600' });
    expect(done.status).toBe(200);
    const page = done; // the secret is shown in the answer to the form, never kept for a redirect
    const secret = page.text.match(/id="client-secret" type="text" readonly value="([^"]+)"/)?.[1];
    expect(secret).toBeTruthy();
    expect(page.text).toMatch(/The previous secret keeps working until \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC/);
    expect(page.text).toContain('data-field="previous-secret"');
    expect(await works(client.client_id, client.client_secret)).toBe(true);
    expect(await works(client.client_id, secret!)).toBe(true);
    const [audit] = (await auditOf(app, 'client.rotate_secret')).filter((a) => a.client_id === client.client_id);
    expect(audit.details).toMatchObject({ via: 'admin_panel', grace_seconds: 3600 });
    // the form's default is no grace
    const again = await s.get(`/admin/clients/${client.client_id}/regenerate`);
    expect(again.text).toMatch(/<option value="0" selected>/);
  });

  it('audits a second secret set by SQL and moves updated_at, without writing its hash to the log', async () => {
    const client = await makeClient(app);
    const extra = 'a-second-secret-written-by-hand-0123456789';
    const stamp = () => app.db.query<{ updated_at: Date }>('SELECT updated_at FROM clients WHERE client_id = $1', [client.client_id])
      .then((r) => new Date(r.rows[0].updated_at).getTime());
    const updatesOf = async () => (await auditOf(app, 'client.update')).filter((a) => a.client_id === client.client_id);
    const before = await stamp();
    await app.db.query(`UPDATE clients SET previous_secret_hash = $2, previous_secret_expires_at = now() + interval '1 day' WHERE client_id = $1`,
      [client.client_id, hashClientSecret(extra)]);
    expect(await works(client.client_id, extra), 'the second secret works: exactly why it must be audited').toBe(true);
    expect(await stamp(), 'updated_at moved').toBeGreaterThan(before);
    const [set] = await updatesOf();
    expect(set?.details).toMatchObject({ via: 'sql', changed: { previous_secret: 'set' } });
    expect(Date.parse(set.details.previous_secret_expires_at) - Date.now()).toBeGreaterThan(86_000_000);
    expect(JSON.stringify(set.details)).not.toContain(hashClientSecret(extra));

    await app.db.query(`UPDATE clients SET previous_secret_expires_at = now() + interval '2 days' WHERE client_id = $1`, [client.client_id]);
    expect((await updatesOf())[0].details.changed).toStrictEqual({ previous_secret: 'expiry changed' });
    await app.db.query('UPDATE clients SET previous_secret_hash = NULL, previous_secret_expires_at = NULL WHERE client_id = $1', [client.client_id]);
    const [cleared] = await updatesOf();
    expect(cleared.details).toMatchObject({ changed: { previous_secret: 'cleared' }, previous_secret_expires_at: null });
    expect(await works(client.client_id, extra)).toBe(false);
    expect(await updatesOf()).toHaveLength(3);
    expect((await auditOf(app, 'client.rotate_secret')).filter((a) => a.client_id === client.client_id), 'none of these is a rotation').toStrictEqual([]);
  });

  it('names a previous secret that is not the replaced one, even when the secret is replaced with it', async () => {
    const client = await makeClient(app);
    const replacement = 'replacement-secret-0123456789abcdefghijklmn';
    await app.db.query(`UPDATE clients SET secret_hash = $2, previous_secret_hash = $3, previous_secret_expires_at = now() + interval '1 hour'
      WHERE client_id = $1`, [client.client_id, hashClientSecret(replacement), hashClientSecret('some-other-secret-altogether')]);
    const [update] = (await auditOf(app, 'client.update')).filter((a) => a.client_id === client.client_id);
    expect(update?.details.changed).toStrictEqual({ secret: 'replaced', previous_secret: 'set' });
  });

  it('refuses by SQL a grace longer than the 30 days the API and the CLI allow, and takes the full 30 days from them', async () => {
    const client = await makeClient(app);
    const extra = hashClientSecret('backdoor');
    for (const until of [`now() + interval '100 years'`, `now() + interval '30 days 1 second'`]) {
      const refused = await app.db.query(`UPDATE clients SET previous_secret_hash = $2, previous_secret_expires_at = ${until} WHERE client_id = $1`,
        [client.client_id, extra]).then(() => null, (e: { code?: string; message: string }) => e);
      expect(refused?.code, until).toBe('23514');
      expect(refused?.message).toMatch(/more than 30 days/);
    }
    const inserted = await app.db.query(
      `INSERT INTO clients (client_id, client_name, secret_hash, secret_last4, callback_url, allowed_ips, previous_secret_hash, previous_secret_expires_at)
       VALUES ($1, 'By SQL', $2, 'door', 'https://sql.example/cb', '{127.0.0.1}', $2, now() + interval '1 year')`,
      [unique('sql-grace-'), extra]).then(() => null, (e: { code?: string }) => e.code);
    expect(inserted).toBe('23514');
    expect(await works(client.client_id, 'backdoor')).toBe(false);
    const rotated = await app.services.clients.rotateSecret(client.client_id, { via: 'cli' }, { graceSeconds: 2_592_000 });
    expect(await works(client.client_id, client.client_secret), 'a 30-day grace by the service passes the trigger').toBe(true);
    expect(await works(client.client_id, rotated.secret)).toBe(true);
  });

  it('still authenticates a client inserted with plain SQL that names none of the rotation columns', async () => {
    const id = unique('sql-client-');
    const secret = 'a-secret-written-by-hand-into-the-database';
    await app.db.query(
      `INSERT INTO clients (client_id, client_name, secret_hash, secret_last4, callback_url, allowed_ips)
       VALUES ($1, 'By SQL', $2, 'base', 'https://sql.example/cb', '{127.0.0.1,::1}')`,
      [id, hashClientSecret(secret)],
    );
    expect(await works(id, secret)).toBe(true);
    expect(await works(id, 'another-secret-another-secret-0123')).toBe(false);
  });
});
