import assert from 'node:assert/strict';
import { access } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { demoCredentialsPath } from '../../src/demo/credentials.ts';
import { DEMO_CLIENT_ID, seedDemo, seedDemoOnFirstStart } from '../../src/demo/seed.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from './form-session.ts';

/** Signs a fresh form session in through /login (this service's own sign-in). */
async function dashboardSession(app: TestApp, login: string, password: string) {
  const s = formSession(app.url);
  const page = await s.get('/login');
  const answer = await s.post('/login', { _csrf: hiddenField(page.text, '_csrf'), step: 'password', login, password });
  assert.equal(answer.status, 303, answer.text);
  assert.equal(answer.headers.location, '/dashboard');
  return s;
}

describe('dashboard forms (HTTP level)', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(() => app.close());

  it('sends signed-out visitors to the sign-in page, and only to this service\'s own pages afterwards', async () => {
    const s = formSession(app.url);
    const dashboard = await s.get('/dashboard');
    assert.equal(dashboard.status, 303);
    assert.equal(dashboard.headers.location, '/login');
    const user = await makeUser(app);
    for (const next of ['https://evil.example/', '//evil.example/x', '/\\evil.example', '/dashboard/../../x']) {
      const fresh = formSession(app.url);
      const page = await fresh.get(`/login?next=${encodeURIComponent(next)}`);
      assert.doesNotMatch(page.text, /evil\.example/);
      const answer = await fresh.post('/login', { _csrf: hiddenField(page.text, '_csrf'), step: 'password', login: user.username, password: user.password, next });
      assert.equal(answer.headers.location, '/dashboard', next);
    }
  });

  it('refuses link, unlink and one-click sign-in forms without the CSRF token, and changes nothing', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const s = await dashboardSession(app, user.username, user.password);
    const page = await s.get('/dashboard');
    assert.equal(page.status, 200);
    const csrf = hiddenField(page.text, '_csrf');
    for (const [path, fields] of [
      ['/dashboard/link', { client_id: client.client_id, external_username: 'x' }],
      ['/dashboard/unlink', { client_id: client.client_id }],
      ['/dashboard/sign-in', { client_id: client.client_id }],
    ] as const) {
      const refused = await s.post(path, fields);
      assert.equal(refused.status, 403, path);
      assert.equal(refused.headers.location, undefined);
    }
    assert.equal((await app.db.query('SELECT 1 FROM user_client_links WHERE user_id = $1', [user.id])).rowCount, 0);

    const linked = await s.post('/dashboard/link', { _csrf: csrf, client_id: client.client_id, external_username: '  j.doe  ' });
    assert.equal(linked.status, 303);
    const row = await app.db.query<{ external_username: string }>('SELECT external_username FROM user_client_links WHERE user_id = $1', [user.id]);
    assert.equal(row.rows[0].external_username, 'j.doe');
    const audit = await app.db.query("SELECT 1 FROM audit_log WHERE action = 'user.link_client' AND user_id = $1", [user.id]);
    assert.equal(audit.rowCount, 1);

    const signIn = await s.post('/dashboard/sign-in', { _csrf: csrf, client_id: client.client_id });
    assert.equal(signIn.status, 303);
    assert.equal(signIn.headers['referrer-policy'], 'no-referrer');
    const location = new URL(signIn.headers.location!);
    assert.equal(`${location.origin}${location.pathname}`, 'https://client.example/sso/callback');
    const validated = await app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token: location.searchParams.get('token') });
    assert.equal(validated.status, 200);
    assert.equal(validated.body.user.id, user.id);
  });

  it('shows a refused link (empty name, unknown system) on the dashboard instead of an error', async () => {
    const user = await makeUser(app);
    const s = await dashboardSession(app, user.username, user.password);
    const csrf = hiddenField((await s.get('/dashboard')).text, '_csrf');
    const empty = await s.post('/dashboard/link', { _csrf: csrf, client_id: 'whatever', external_username: '   ' });
    assert.equal(empty.status, 303);
    assert.match((await s.get('/dashboard')).text, /Enter your username at that system/);
    const unknown = await s.post('/dashboard/link', { _csrf: csrf, client_id: 'no-such-client', external_username: 'me' });
    assert.equal(unknown.status, 303);
    assert.match((await s.get('/dashboard')).text, /does not exist or is inactive/);
  });
});

describe('demo seeding', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(() => app.close());

  it('seeds nothing in production, on PostgreSQL, or when a client system exists', async () => {
    const base = { NODE_ENV: 'development' as const, DATA_DIR: app.config.DATA_DIR, DATABASE_URL: undefined };
    assert.equal(await seedDemoOnFirstStart(app.services, { ...base, NODE_ENV: 'production' }, app.url), null);
    assert.equal(await seedDemoOnFirstStart(app.services, { ...base, DATABASE_URL: 'postgres://db.example/auth' }, app.url), null);
    assert.equal((await app.services.clients.listClients()).length, 0, 'nothing was created');
    await makeClient(app);
    assert.equal(await seedDemoOnFirstStart(app.services, base, app.url), null);
    assert.equal(await app.services.clients.findClient(DEMO_CLIENT_ID), null);
  });

  it('creates the demo client and user; the callback page validates the token over HTTP and shows the user', async () => {
    const demo = await seedDemo(app.services, { baseUrl: app.url, dataDir: app.config.DATA_DIR });
    assert.deepEqual(demo.created, { client: true, user: true });
    assert.equal(demo.callback_url, `${app.url}/demo/callback`);
    await access(demoCredentialsPath(app.config.DATA_DIR));

    const s = formSession(app.url);
    const page = await s.get(new URL(demo.login_url).pathname + new URL(demo.login_url).search);
    assert.match(page.text, /Demo client system/);
    const answer = await s.post('/sso/login', {
      _csrf: hiddenField(page.text, '_csrf'), step: 'password', client_id: DEMO_CLIENT_ID, state: 'demo', login: demo.username, password: demo.password,
    });
    assert.equal(answer.status, 303);
    const callback = new URL(answer.headers.location!);
    assert.equal(callback.pathname, '/demo/callback');
    const shown = await s.get(callback.pathname + callback.search);
    assert.equal(shown.status, 200, shown.text);
    assert.match(shown.text, /Signed in as demo/);
    assert.match(shown.text, /demo@example\.com/);
    const replay = await s.get(callback.pathname + callback.search);
    assert.equal(replay.status, 401);
    assert.match(replay.text, /token_already_used/);
  });

  it('running it again rotates the demo secret and the password; the old password stops working', async () => {
    const first = await seedDemo(app.services, { baseUrl: app.url, dataDir: app.config.DATA_DIR });
    const second = await seedDemo(app.services, { baseUrl: app.url, dataDir: app.config.DATA_DIR });
    assert.deepEqual(second.created, { client: false, user: false });
    assert.notEqual(first.password, second.password);
    const old = await app.http.post('/api/auth/login', { login: 'demo', password: first.password });
    assert.equal(old.status, 401);
    const fresh = await app.http.post('/api/auth/login', { login: 'demo', password: second.password });
    assert.equal(fresh.status, 200);
  });
});
