import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashClientSecret } from '../../src/clients/credentials.ts';
import { auditOf, panelSession, signedIn } from '../admin/support.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { admin } from '../helpers/cli.ts';
import { makeUser } from '../helpers/factories.ts';
import { hiddenField } from '../pages/form-session.ts';

/** A client's initiate-login URL (migrations/0023): set and checked wherever a client is written. */
describe('a client\'s initiate-login URL', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());

  const stored = async (clientId: string) =>
    (await app.db.query<{ initiate_login_uri: string | null }>('SELECT initiate_login_uri FROM clients WHERE client_id = $1', [clientId])).rows[0]?.initiate_login_uri;

  it('is checked by the database as callback_url is, whoever writes the row (a seed, psql), naming the client and the value', async () => {
    await app.db.query(`INSERT INTO clients (client_id, client_name, secret_hash, callback_url, initiate_login_uri)
      VALUES ('sql-initiate', 'SQL', $1, 'https://shop.example/cb', 'https://shop.example/sso/start')`, [hashClientSecret('a-secret-for-initiate')]);
    expect(await stored('sql-initiate')).toBe('https://shop.example/sso/start');
    for (const bad of ['', '/sso/start', 'ftp://shop.example/x', 'https://shop.example/x#frag', 'https://user:pw@shop.example/x', 'https://shop.example/a b', 'javascript:alert(1)']) {
      await expect(app.db.query('UPDATE clients SET initiate_login_uri = $1 WHERE client_id = \'sql-initiate\'', [bad]), JSON.stringify(bad))
        .rejects.toThrow(`initiate_login_uri "${bad}" of client sql-initiate is not an absolute http(s) URL`);
    }
    await app.db.query("UPDATE clients SET initiate_login_uri = NULL WHERE client_id = 'sql-initiate'");
    expect(await stored('sql-initiate')).toBe(null);
    // the change is audited by the database, as every client change
    const [update] = (await auditOf(app, 'client.update')).filter((a) => a.client_id === 'sql-initiate');
    expect(update.details.changed).toStrictEqual({ initiate_login_uri: 'removed' });
  });

  it('is set, shown and removed through the admin API, and refused there as bad input', async () => {
    const { as } = await signedIn(app);
    const created = await app.http.post('/api/admin/clients', { client_name: 'Api Initiate', callback_url: 'https://api.example/cb', initiate_login_uri: 'https://api.example/sso/start' }, as);
    expect(created.status, created.text).toBe(201);
    expect(created.body.initiate_login_uri).toBe('https://api.example/sso/start');
    const id = created.body.client_id as string;
    const bad = await app.http.patch(`/api/admin/clients/${id}`, { initiate_login_uri: 'https://api.example/x#y' }, as);
    expect([bad.status, bad.body.error]).toStrictEqual([400, 'invalid_initiate_login_uri']);
    const changed = await app.http.patch(`/api/admin/clients/${id}`, { initiate_login_uri: 'https://api.example/other' }, as);
    expect(changed.body.initiate_login_uri).toBe('https://api.example/other');
    expect((await auditOf(app, 'client.update')).find((a) => a.client_id === id)?.details.changed).toStrictEqual({ initiate_login_uri: 'https://api.example/other' });
    const removed = await app.http.patch(`/api/admin/clients/${id}`, { initiate_login_uri: null }, as);
    expect([removed.status, removed.body.initiate_login_uri]).toStrictEqual([200, null]);
    expect((await app.http.get(`/api/admin/clients/${id}`, as)).body.initiate_login_uri).toBe(null);
  });

  it('is set with client create|update --initiate-login-uri, and removed with an empty value', async () => {
    const made = await admin(app, ['client', 'create', '--name', 'Cli Initiate', '--callback-url', 'https://cli.example/cb', '--id', 'cli-initiate',
      '--initiate-login-uri', 'https://cli.example/sso/start', '--json']);
    expect(made.code, made.stderr).toBe(0);
    expect(JSON.parse(made.stdout).initiate_login_uri).toBe('https://cli.example/sso/start');
    const refused = await admin(app, ['client', 'update', 'cli-initiate', '--initiate-login-uri', 'not a url']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/initiate_login_uri must be an absolute http\(s\) URL/);
    expect(await stored('cli-initiate')).toBe('https://cli.example/sso/start');
    const cleared = await admin(app, ['client', 'update', 'cli-initiate', '--initiate-login-uri', '']);
    expect(cleared.code, cleared.stderr).toBe(0);
    expect(await stored('cli-initiate')).toBe(null);
  });

  it('is a field of the panel\'s client form, and the registration form may choose the id, checked as the CLI\'s --id', async () => {
    const boss = await makeUser(app, { role: 'admin' });
    const s = await panelSession(app, boss);
    const page = await s.get('/admin/clients');
    expect(page.text).toMatch(/name="client_id"/);
    expect(page.text).toMatch(/name="initiate_login_uri"/);
    const csrf = hiddenField(page.text, '_csrf');
    const form = { _csrf: csrf, client_name: 'Panel Initiate', callback_url: 'https://panel.example/cb', allowed_ips: '', logo_url: '' };

    const badId = await s.post('/admin/clients', { ...form, client_id: 'No Spaces', initiate_login_uri: '' });
    expect(badId.status).toBe(400);
    expect(badId.text).toMatch(/id="new-id-error"[^>]*>[^<]*3-64 lower-case letters/);
    const badUri = await s.post('/admin/clients', { ...form, client_id: 'panel-initiate', initiate_login_uri: 'panel.example/start' });
    expect(badUri.status).toBe(400);
    expect(badUri.text).toMatch(/id="new-initiate-error"/);
    expect(await stored('panel-initiate')).toBe(undefined);

    const ok = await s.post('/admin/clients', { ...form, client_id: 'panel-initiate', initiate_login_uri: 'https://panel.example/start' });
    expect(ok.status, ok.text).toBe(200);
    expect(await stored('panel-initiate')).toBe('https://panel.example/start');
    // the same id again is that field's problem
    const taken = await s.post('/admin/clients', { ...form, client_id: 'panel-initiate', initiate_login_uri: '' });
    expect(taken.status).toBe(400);
    expect(taken.text).toMatch(/id="new-id-error"[^>]*>[^<]*already exists/);

    // the edit page changes and clears it
    const edit = await s.get('/admin/clients/panel-initiate');
    expect(edit.text).toMatch(/name="initiate_login_uri"[^>]*value="https:\/\/panel.example\/start"/);
    const shown = (name: string) => hiddenField(edit.text, name);
    const saved = await s.post('/admin/clients/panel-initiate', {
      _csrf: hiddenField(edit.text, '_csrf'), client_name: 'Panel Initiate', callback_url: 'https://panel.example/cb', allowed_ips: '', logo_url: '', initiate_login_uri: '',
      was_client_name: shown('was_client_name'), was_callback_url: shown('was_callback_url'), was_allowed_ips: shown('was_allowed_ips'),
      was_logo_url: shown('was_logo_url'), was_initiate_login_uri: shown('was_initiate_login_uri'),
    });
    expect(saved.status, saved.text).toBe(303);
    expect(await stored('panel-initiate')).toBe(null);
  });
});
