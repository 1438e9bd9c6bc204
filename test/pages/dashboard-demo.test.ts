import { access } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoCredentialsPath } from '../../src/demo/credentials.ts';
import { DEMO_CLIENT_ID, seedDemo, seedDemoOnFirstStart } from '../../src/demo/seed.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from './form-session.ts';

/** Signs a fresh form session in through /login (this service's own sign-in). */
async function dashboardSession(app: TestApp, login: string, password: string) {
  const s = formSession(app.app);
  const page = await s.get('/login');
  const answer = await s.post('/login', { _csrf: hiddenField(page.text, '_csrf'), step: 'password', login, password });
  expect(answer.status, answer.text).toBe(303);
  expect(answer.headers.location).toBe('/dashboard');
  return s;
}

describe('dashboard forms (HTTP level)', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  it('sends signed-out visitors to the sign-in page, and only to this service\'s own pages afterwards', async () => {
    const s = formSession(app.app);
    const dashboard = await s.get('/dashboard');
    expect(dashboard.status).toBe(303);
    expect(dashboard.headers.location).toBe('/login');
    const user = await makeUser(app);
    for (const next of ['https://evil.example/', '//evil.example/x', '/\\evil.example', '/dashboard/../../x']) {
      const fresh = formSession(app.app);
      const page = await fresh.get(`/login?next=${encodeURIComponent(next)}`);
      expect(page.text).not.toMatch(/evil\.example/);
      const answer = await fresh.post('/login', { _csrf: hiddenField(page.text, '_csrf'), step: 'password', login: user.username, password: user.password, next });
      expect(answer.headers.location, next).toBe('/dashboard');
    }
  });

  it('refuses link, unlink and one-click sign-in forms without the CSRF token, and changes nothing', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const s = await dashboardSession(app, user.username, user.password);
    const page = await s.get('/dashboard');
    expect(page.status).toBe(200);
    const csrf = hiddenField(page.text, '_csrf');
    for (const [path, fields] of [
      ['/dashboard/link', { client_id: client.client_id, external_username: 'x' }],
      ['/dashboard/unlink', { client_id: client.client_id }],
      ['/dashboard/sign-in', { client_id: client.client_id }],
    ] as const) {
      const refused = await s.post(path, fields);
      expect(refused.status, path).toBe(403);
      expect(refused.headers.location).toBe(undefined);
    }
    expect((await app.db.query('SELECT 1 FROM user_client_links WHERE user_id = $1', [user.id])).rowCount).toBe(0);

    const linked = await s.post('/dashboard/link', { _csrf: csrf, client_id: client.client_id, external_username: '  j.doe  ' });
    expect(linked.status).toBe(303);
    const row = await app.db.query<{ external_username: string }>('SELECT external_username FROM user_client_links WHERE user_id = $1', [user.id]);
    expect(row.rows[0].external_username).toBe('j.doe');
    const audit = await app.db.query("SELECT 1 FROM audit_log WHERE action = 'user.link_client' AND user_id = $1", [user.id]);
    expect(audit.rowCount).toBe(1);

    const signIn = await s.post('/dashboard/sign-in', { _csrf: csrf, client_id: client.client_id });
    expect(signIn.status).toBe(303);
    expect(signIn.headers['referrer-policy']).toBe('no-referrer');
    const location = new URL(signIn.headers.location!);
    expect(`${location.origin}${location.pathname}`).toBe('https://client.example/sso/callback');
    const validated = await app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token: location.searchParams.get('token') });
    expect(validated.status).toBe(200);
    expect(validated.body.user.id).toBe(user.id);
  });

  it('shows a refused link (empty name, unknown system) on the dashboard instead of an error', async () => {
    const user = await makeUser(app);
    const s = await dashboardSession(app, user.username, user.password);
    const csrf = hiddenField((await s.get('/dashboard')).text, '_csrf');
    const empty = await s.post('/dashboard/link', { _csrf: csrf, client_id: 'whatever', external_username: '   ' });
    expect(empty.status).toBe(303);
    expect((await s.get('/dashboard')).text).toMatch(/Enter your username at that system/);
    const unknown = await s.post('/dashboard/link', { _csrf: csrf, client_id: 'no-such-client', external_username: 'me' });
    expect(unknown.status).toBe(303);
    expect((await s.get('/dashboard')).text).toMatch(/does not exist or is inactive/);
  });
});

describe('demo seeding', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  it('seeds nothing in production, on PostgreSQL, or when a client system exists', async () => {
    const base = { NODE_ENV: 'development' as const, DATA_DIR: app.config.DATA_DIR, DATABASE_URL: undefined };
    expect(await seedDemoOnFirstStart(app.services, { ...base, NODE_ENV: 'production' }, (await app.listen()))).toBe(null);
    expect(await seedDemoOnFirstStart(app.services, { ...base, DATABASE_URL: 'postgres://db.example/auth' }, (await app.listen()))).toBe(null);
    expect((await app.services.clients.listClients()).length, 'nothing was created').toBe(0);
    await makeClient(app);
    expect(await seedDemoOnFirstStart(app.services, base, (await app.listen()))).toBe(null);
    expect(await app.services.clients.findClient(DEMO_CLIENT_ID)).toBe(null);
  });

  it('leaves the demo client alone once the demo user was removed on purpose: a later start is no first start', async () => {
    const other = await startTestApp();
    try {
      const base = { NODE_ENV: 'development' as const, DATA_DIR: other.config.DATA_DIR, DATABASE_URL: undefined };
      const url = await other.listen();
      expect(await seedDemoOnFirstStart(other.services, base, url)).not.toBe(null);
      await other.services.clients.updateClient(DEMO_CLIENT_ID, { callbackUrl: 'http://127.0.0.1:8080/my-app/cb' }, { via: 'cli' });
      await other.db.query("DELETE FROM users WHERE username = 'demo'");
      const before = (await other.db.query("SELECT secret_hash, callback_url FROM clients WHERE client_id = 'demo'")).rows[0];
      expect(await seedDemoOnFirstStart(other.services, base, url)).toBe(null);
      expect((await other.db.query("SELECT secret_hash, callback_url FROM clients WHERE client_id = 'demo'")).rows[0], 'secret and callback kept').toStrictEqual(before);
    } finally {
      await other.close();
    }
  });

  it('creates the demo client and user; the callback page validates the token over HTTP and shows the user', async () => {
    const demo = await seedDemo(app.services, { baseUrl: (await app.listen()), dataDir: app.config.DATA_DIR });
    expect(demo.created).toStrictEqual({ client: true, user: true });
    expect(demo.callback_url).toBe(`${await app.listen()}/demo/callback`);
    await access(demoCredentialsPath(app.config.DATA_DIR));

    const s = formSession(app.app);
    const page = await s.get(new URL(demo.login_url).pathname + new URL(demo.login_url).search);
    expect(page.text).toMatch(/Demo client system/);
    const answer = await s.post('/sso/login', {
      _csrf: hiddenField(page.text, '_csrf'), step: 'password', client_id: DEMO_CLIENT_ID, state: 'demo', login: demo.username, password: demo.password,
    });
    expect(answer.status).toBe(303);
    const callback = new URL(answer.headers.location!);
    expect(callback.pathname).toBe('/demo/callback');
    const shown = await s.get(callback.pathname + callback.search);
    expect(shown.status, shown.text).toBe(200);
    expect(shown.text).toMatch(/Signed in as demo/);
    expect(shown.text).toMatch(/demo@example\.com/);
    const replay = await s.get(callback.pathname + callback.search);
    expect(replay.status).toBe(401);
    expect(replay.text).toMatch(/token_already_used/);
  });

  it('running it again rotates the demo secret and the password; the old password stops working', async () => {
    const first = await seedDemo(app.services, { baseUrl: (await app.listen()), dataDir: app.config.DATA_DIR });
    const second = await seedDemo(app.services, { baseUrl: (await app.listen()), dataDir: app.config.DATA_DIR });
    expect(second.created).toStrictEqual({ client: false, user: false });
    expect(first.password).not.toBe(second.password);
    const old = await app.http.post('/api/auth/login', { login: 'demo', password: first.password });
    expect(old.status).toBe(401);
    const fresh = await app.http.post('/api/auth/login', { login: 'demo', password: second.password });
    expect(fresh.status).toBe(200);
  });
});
