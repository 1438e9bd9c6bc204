import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as jose from 'jose';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { auditRows, deliveries, sessionCookie, signIn, subscribe } from './support.ts';

describe('user sign-in over the API', () => {
  let app: TestApp;
  let webhookId: number;
  before(async () => {
    app = await startTestApp();
    webhookId = await subscribe(app, ['user.login', 'user.login_failed', 'user.logout']);
  });
  after(() => app.close());

  it('logs in, then serves the profile by cookie and by bearer; 401 without either', async () => {
    const user = await makeUser(app, { role: 'editor', fullName: 'Ada Lovelace' });
    const profile = { id: user.id, username: user.username, email: user.email, role: 'editor', full_name: 'Ada Lovelace' };

    const { res, cookie } = await signIn(app, user.username, user.password);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { success: true, user: profile });
    assert.equal(res.headers['cache-control'], 'no-store');
    assert.ok(cookie, 'a session cookie is set');
    const byCookie = await app.http.get('/api/user', { headers: { cookie: cookie! } });
    assert.equal(byCookie.status, 200, byCookie.text);
    assert.deepEqual(byCookie.body, profile);

    const tokenLogin = await app.http.post('/api/login', { username: user.username, password: user.password });
    assert.equal(tokenLogin.status, 200, tokenLogin.text);
    assert.equal(tokenLogin.body.token_type, 'Bearer');
    assert.equal(tokenLogin.body.expires_in, app.config.ACCESS_TOKEN_TTL_SECONDS);
    assert.deepEqual(tokenLogin.body.user, profile);
    assert.equal(sessionCookie(tokenLogin), undefined, 'the token login sets no session');
    const byBearer = await app.http.get('/api/user', { headers: { authorization: `Bearer ${tokenLogin.body.token}` } });
    assert.equal(byBearer.status, 200, byBearer.text);
    assert.deepEqual(byBearer.body, profile);

    const anonymous = await app.http.get('/api/user');
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.body.error, 'unauthenticated');
    assert.equal((await app.http.get('/api/user', { headers: { authorization: 'Bearer not-a-token' } })).status, 401);
    assert.equal((await app.http.get('/api/user', { headers: { cookie: 'auth.sid=s%3Aforged.signature' } })).status, 401);
  });

  it('sets the session cookie HttpOnly and SameSite=Lax, not Secure outside production', async () => {
    const user = await makeUser(app);
    const { res } = await signIn(app, user.username, user.password);
    const setCookie = ([] as string[]).concat(res.headers['set-cookie'] ?? []).find((c) => c.startsWith('auth.sid='))!;
    assert.match(setCookie, /; HttpOnly/i);
    assert.match(setCookie, /; SameSite=Lax/i);
    assert.match(setCookie, /; Path=\//i);
    assert.doesNotMatch(setCookie, /; Secure/i);
    assert.match(setCookie, /; Expires=/i);
  });

  it('gives a new session id at every sign-in and keeps sessions in the database for every instance', async () => {
    const user = await makeUser(app);
    const first = await signIn(app, user.username, user.password);
    const second = await app.http.post('/api/auth/login', { login: user.username, password: user.password }, { headers: { cookie: first.cookie! } });
    const secondCookie = sessionCookie(second);
    assert.ok(secondCookie);
    assert.notEqual(secondCookie, first.cookie, 'the session id is regenerated at login');
    assert.equal((await app.http.get('/api/user', { headers: { cookie: first.cookie! } })).status, 401, 'the old id is gone');

    const other = await startTestApp({}, { db: app.db });
    try {
      const there = await other.http.get('/api/user', { headers: { cookie: secondCookie! } });
      assert.equal(there.status, 200, 'a second instance on the same database sees the session');
      assert.equal(there.body.id, user.id);
    } finally {
      await other.stop();
    }
  });

  it('answers a wrong password, an unknown name and an inactive user alike: 401 invalid_credentials', async () => {
    const user = await makeUser(app);
    const inactive = await makeUser(app, { active: false });
    const wrong = await app.http.post('/api/auth/login', { login: user.username, password: 'wrong password' });
    const unknown = await app.http.post('/api/auth/login', { login: `${user.username}-nobody`, password: 'wrong password' });
    const off = await app.http.post('/api/auth/login', { login: inactive.username, password: inactive.password });
    const viaToken = await app.http.post('/api/login', { username: user.username, password: 'wrong password' });
    for (const r of [wrong, unknown, off, viaToken]) {
      assert.equal(r.status, 401, r.text);
      assert.deepEqual(r.body, { error: 'invalid_credentials', message: 'Invalid login or password' });
      assert.equal(sessionCookie(r), undefined);
    }
  });

  it('refuses a password longer than 72 bytes even when its first 72 bytes are right', async () => {
    const password = 'p'.repeat(72);
    const user = await makeUser(app, { password });
    assert.equal((await signIn(app, user.username, password)).res.status, 200);
    assert.equal((await signIn(app, user.username, `${password}extra`)).res.status, 401);
  });

  it('answers bad bodies with 400 validation_error, never 500', async () => {
    for (const body of [{}, { login: 'x' }, { login: 1, password: 'x' }, { login: 'x', password: 'y'.repeat(5000) }]) {
      const r = await app.http.post('/api/auth/login', body);
      assert.equal(r.status, 400, r.text);
      assert.equal(r.body.error, 'validation_error');
    }
    assert.equal((await app.http.post('/api/login', { login: 'x', password: 'y' })).body.error, 'validation_error');
  });

  it('audits success and failure with the reason and emits user.login and user.login_failed', async () => {
    const user = await makeUser(app);
    await app.http.post('/api/auth/login', { login: user.username, password: 'nope nope' }, { headers: { 'user-agent': 'test-agent/1' } });
    await app.http.post('/api/auth/login', { login: user.username, password: user.password }, { headers: { 'user-agent': 'test-agent/1' } });
    const rows = (await auditRows(app, user.username)).filter((r) => r.action === 'user.login');
    assert.deepEqual(rows.map((r) => [r.outcome, r.details.reason]), [['failure', 'invalid_password'], ['success', undefined]]);
    assert.equal(rows[0].ip_address, '127.0.0.1');
    assert.doesNotMatch(JSON.stringify(rows), /nope nope|correct horse/, 'no password in the audit log');

    const failed = (await deliveries(app, webhookId, 'user.login_failed')).filter((d) => d.username === user.username);
    assert.deepEqual(failed, [{ username: user.username, user_id: user.id, ip_address: '127.0.0.1', user_agent: 'test-agent/1', reason: 'invalid_password' }]);
    const logins = (await deliveries(app, webhookId, 'user.login')).filter((d) => d.user_id === user.id);
    assert.deepEqual(logins, [{
      user_id: user.id, email: user.email, ip_address: '127.0.0.1', user_agent: 'test-agent/1', client_system: 'auth-service', '2fa_used': false,
    }]);
  });

  it('never accepts an access token as an SSO token, nor an SSO token as an access token', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const access = (await app.http.post('/api/login', { username: user.username, password: user.password })).body.token;
    const asSso = await app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token: access });
    assert.equal(asSso.status, 401);
    assert.equal(asSso.body.error, 'invalid_token');

    const sso = (await app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username: user.username })).body.token;
    assert.equal(typeof sso, 'string');
    const asAccess = await app.http.get('/api/user', { headers: { authorization: `Bearer ${sso}` } });
    assert.equal(asAccess.status, 401);
    assert.equal(asAccess.body.error, 'unauthenticated');
  });

  it('stops honouring a session or access token once the user is deactivated', async () => {
    const user = await makeUser(app);
    const { cookie } = await signIn(app, user.username, user.password);
    const token = (await app.http.post('/api/login', { username: user.username, password: user.password })).body.token;
    await app.services.users.setActive(user.username, false, { via: 'cli' });
    assert.equal((await app.http.get('/api/user', { headers: { cookie: cookie! } })).status, 401);
    assert.equal((await app.http.get('/api/user', { headers: { authorization: `Bearer ${token}` } })).status, 401);
  });
});

describe('sign-out', () => {
  let app: TestApp;
  let webhookId: number;
  before(async () => {
    app = await startTestApp();
    webhookId = await subscribe(app, ['user.logout']);
  });
  after(() => app.close());

  const issue = async (client: { client_id: string; client_secret: string }, username: string) =>
    (await app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username })).body.token as string;
  const validate = (client: { client_id: string; client_secret: string }, token: string) =>
    app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token });

  it('POST /api/auth/logout ends the session, revokes unused SSO tokens, audits and emits user.logout', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const { cookie } = await signIn(app, user.username, user.password);
    const unused = await issue(client, user.username);

    const out = await app.http.post('/api/auth/logout', undefined, { headers: { cookie: cookie! } });
    assert.equal(out.status, 200, out.text);
    assert.deepEqual(out.body, { success: true });
    assert.match(String(out.headers['set-cookie']), /auth\.sid=;/, 'the cookie is cleared');
    assert.equal((await app.http.get('/api/user', { headers: { cookie: cookie! } })).status, 401);
    const revoked = await validate(client, unused);
    assert.equal(revoked.status, 401);
    assert.equal(revoked.body.error, 'token_revoked');

    const audit = (await auditRows(app, user.username)).filter((r) => r.action === 'user.logout');
    assert.equal(audit.length, 1);
    assert.equal(audit[0].details.invalidated_tokens, 1);
    const events = (await deliveries(app, webhookId, 'user.logout')).filter((d) => d.user_id === user.id);
    assert.deepEqual(events, [{ user_id: user.id, email: user.email, ip_address: '127.0.0.1', client_system: 'auth-service' }]);
  });

  it('POST /api/auth/logout without a session is a harmless 200', async () => {
    const out = await app.http.post('/api/auth/logout');
    assert.equal(out.status, 200);
  });

  it('POST /api/sso/logout revokes that user\'s unused tokens for the calling client only', async () => {
    const portal = await makeClient(app);
    const shop = await makeClient(app);
    const user = await makeUser(app);
    const other = await makeUser(app);
    const consumed = await issue(portal, user.username);
    assert.equal((await validate(portal, consumed)).status, 200);
    const pendingPortal = await issue(portal, user.username);
    const pendingShop = await issue(shop, user.username);
    const otherUsers = await issue(portal, other.username);

    const out = await app.http.post('/api/sso/logout', { client_id: portal.client_id, client_secret: portal.client_secret, token: consumed });
    assert.equal(out.status, 200, out.text);
    assert.deepEqual(out.body, { success: true, invalidated_tokens: 1 });
    assert.equal((await validate(portal, pendingPortal)).body.error, 'token_revoked');
    assert.equal((await validate(shop, pendingShop)).status, 200, 'another client\'s token is untouched');
    assert.equal((await validate(portal, otherUsers)).status, 200, 'another user\'s token is untouched');

    const events = (await deliveries(app, webhookId, 'user.logout')).filter((d) => d.user_id === user.id);
    assert.deepEqual(events, [{ user_id: user.id, email: user.email, ip_address: '127.0.0.1', client_system: portal.client_id }]);
    const audit = (await auditRows(app, user.username)).filter((r) => r.action === 'user.logout');
    assert.equal(audit.length, 1);
  });

  it('POST /api/sso/logout accepts a token that has since expired', async () => {
    const portal = await makeClient(app);
    const user = await makeUser(app);
    const consumed = await issue(portal, user.username);
    assert.equal((await validate(portal, consumed)).status, 200);
    const pending = await issue(portal, user.username);
    // the same claims (same jti), expired an hour ago, signed with the service's key
    const claims = jose.decodeJwt(consumed);
    const key = new TextEncoder().encode(app.config.JWT_SECRET);
    const now = Math.floor(Date.now() / 1000);
    const expired = await new jose.SignJWT({ ...claims, iat: now - 7200, exp: now - 3600 }).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(key);
    const out = await app.http.post('/api/sso/logout', { client_id: portal.client_id, client_secret: portal.client_secret, token: expired });
    assert.equal(out.status, 200, out.text);
    assert.equal((await validate(portal, pending)).body.error, 'token_revoked');
  });

  it('POST /api/sso/logout refuses bad credentials, another client\'s token and an access token', async () => {
    const portal = await makeClient(app);
    const shop = await makeClient(app);
    const user = await makeUser(app);
    const token = await issue(portal, user.username);
    const badSecret = await app.http.post('/api/sso/logout', { client_id: portal.client_id, client_secret: 'wrong', token });
    assert.equal(badSecret.status, 401);
    assert.equal(badSecret.body.error, 'invalid_client');
    const otherClient = await app.http.post('/api/sso/logout', { client_id: shop.client_id, client_secret: shop.client_secret, token });
    assert.equal(otherClient.status, 401);
    assert.equal(otherClient.body.error, 'invalid_token');
    const access = (await app.http.post('/api/login', { username: user.username, password: user.password })).body.token;
    const withAccess = await app.http.post('/api/sso/logout', { client_id: portal.client_id, client_secret: portal.client_secret, token: access });
    assert.equal(withAccess.status, 401);
    assert.equal(withAccess.body.error, 'invalid_token');
    assert.equal((await validate(portal, token)).status, 200, 'nothing was revoked');
  });
});
