import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as jose from 'jose';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { auditRows, deliveries, sessionCookie, signIn, subscribe } from './support.ts';

describe('user sign-in over the API', () => {
  let app: TestApp;
  let webhookId: number;
  beforeAll(async () => {
    app = await startTestApp();
    webhookId = await subscribe(app, ['user.login', 'user.login_failed', 'user.logout']);
  });
  afterAll(() => app.close());

  it('logs in, then serves the profile by cookie and by bearer; 401 without either', async () => {
    const user = await makeUser(app, { role: 'editor', fullName: 'Ada Lovelace' });
    const profile = { id: user.id, username: user.username, email: user.email, role: 'editor', full_name: 'Ada Lovelace' };

    const { res, cookie } = await signIn(app, user.username, user.password);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toStrictEqual({ success: true, user: profile });
    expect(res.headers['cache-control']).toBe('no-store');
    expect(cookie, 'a session cookie is set').toBeTruthy();
    const byCookie = await app.http.get('/api/user', { headers: { cookie: cookie! } });
    expect(byCookie.status, byCookie.text).toBe(200);
    expect(byCookie.body).toStrictEqual(profile);

    const tokenLogin = await app.http.post('/api/login', { username: user.username, password: user.password });
    expect(tokenLogin.status, tokenLogin.text).toBe(200);
    expect(tokenLogin.body.token_type).toBe('Bearer');
    expect(tokenLogin.body.expires_in).toBe(app.config.ACCESS_TOKEN_TTL_SECONDS);
    expect(tokenLogin.body.user).toStrictEqual(profile);
    expect(sessionCookie(tokenLogin), 'the token login sets no session').toBe(undefined);
    const byBearer = await app.http.get('/api/user', { headers: { authorization: `Bearer ${tokenLogin.body.token}` } });
    expect(byBearer.status, byBearer.text).toBe(200);
    expect(byBearer.body).toStrictEqual(profile);

    const anonymous = await app.http.get('/api/user');
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.error).toBe('unauthenticated');
    expect((await app.http.get('/api/user', { headers: { authorization: 'Bearer not-a-token' } })).status).toBe(401);
    expect((await app.http.get('/api/user', { headers: { cookie: 'auth.sid=s%3Aforged.signature' } })).status).toBe(401);
  });

  it('sets the session cookie HttpOnly and SameSite=Lax, not Secure outside production', async () => {
    const user = await makeUser(app);
    const { res } = await signIn(app, user.username, user.password);
    const setCookie = ([] as string[]).concat(res.headers['set-cookie'] ?? []).find((c) => c.startsWith('auth.sid='))!;
    expect(setCookie).toMatch(/; HttpOnly/i);
    expect(setCookie).toMatch(/; SameSite=Lax/i);
    expect(setCookie).toMatch(/; Path=\//i);
    expect(setCookie).not.toMatch(/; Secure/i);
    expect(setCookie).toMatch(/; Expires=/i);
  });

  it('gives a new session id at every sign-in and keeps sessions in the database for every instance', async () => {
    const user = await makeUser(app);
    const first = await signIn(app, user.username, user.password);
    const second = await app.http.post('/api/auth/login', { login: user.username, password: user.password }, { headers: { cookie: first.cookie! } });
    const secondCookie = sessionCookie(second);
    expect(secondCookie).toBeTruthy();
    expect(secondCookie, 'the session id is regenerated at login').not.toBe(first.cookie);
    expect((await app.http.get('/api/user', { headers: { cookie: first.cookie! } })).status, 'the old id is gone').toBe(401);

    const other = await startTestApp({}, { db: app.db });
    try {
      const there = await other.http.get('/api/user', { headers: { cookie: secondCookie! } });
      expect(there.status, 'a second instance on the same database sees the session').toBe(200);
      expect(there.body.id).toBe(user.id);
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
      expect(r.status, r.text).toBe(401);
      const { attempts_remaining: left, ...rest } = r.body;
      expect(rest).toStrictEqual({ error: 'invalid_credentials', message: 'Invalid login or password.' });
      expect(left).toBeGreaterThan(0);

      expect(sessionCookie(r)).toBe(undefined);
    }
    // attempts_remaining counts per login name, known or not: a first failure is a first failure
    expect(unknown.body).toStrictEqual(wrong.body);
    expect(off.body).toStrictEqual(wrong.body);
  });

  it('refuses a password longer than 72 bytes even when its first 72 bytes are right', async () => {
    const password = 'p'.repeat(72);
    const user = await makeUser(app, { password });
    expect((await signIn(app, user.username, password)).res.status).toBe(200);
    expect((await signIn(app, user.username, `${password}extra`)).res.status).toBe(401);
  });

  it('answers bad bodies with 400 validation_error, never 500', async () => {
    for (const body of [{}, { login: 'x' }, { login: 1, password: 'x' }, { login: 'x', password: 'y'.repeat(5000) }]) {
      const r = await app.http.post('/api/auth/login', body);
      expect(r.status, r.text).toBe(400);
      expect(r.body.error).toBe('validation_error');
    }
    expect((await app.http.post('/api/login', { login: 'x', password: 'y' })).body.error).toBe('validation_error');
  });

  it('audits success and failure with the reason and emits user.login and user.login_failed', async () => {
    const user = await makeUser(app);
    await app.http.post('/api/auth/login', { login: user.username, password: 'nope nope' }, { headers: { 'user-agent': 'test-agent/1' } });
    await app.http.post('/api/auth/login', { login: user.username, password: user.password }, { headers: { 'user-agent': 'test-agent/1' } });
    const rows = (await auditRows(app, user.username)).filter((r) => r.action === 'user.login');
    expect(rows.map((r) => [r.outcome, r.details.reason])).toStrictEqual([['failure', 'invalid_password'], ['success', undefined]]);
    expect(rows[0].ip_address).toBe('127.0.0.1');
    expect(JSON.stringify(rows), 'no password in the audit log').not.toMatch(/nope nope|correct horse/);

    const failed = (await deliveries(app, webhookId, 'user.login_failed')).filter((d) => d.username === user.username);
    expect(failed).toStrictEqual([{ username: user.username, user_id: user.id, ip_address: '127.0.0.1', user_agent: 'test-agent/1', reason: 'invalid_password' }]);
    const logins = (await deliveries(app, webhookId, 'user.login')).filter((d) => d.user_id === user.id);
    expect(logins).toStrictEqual([{
      user_id: user.id, email: user.email, ip_address: '127.0.0.1', user_agent: 'test-agent/1', client_system: 'auth-service', '2fa_used': false,
    }]);
  });

  it('never accepts an access token as an SSO token, nor an SSO token as an access token', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const access = (await app.http.post('/api/login', { username: user.username, password: user.password })).body.token;
    const asSso = await app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token: access });
    expect(asSso.status).toBe(401);
    expect(asSso.body.error).toBe('invalid_token');

    const sso = (await app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username: user.username })).body.token;
    expect(typeof sso).toBe('string');
    const asAccess = await app.http.get('/api/user', { headers: { authorization: `Bearer ${sso}` } });
    expect(asAccess.status).toBe(401);
    expect(asAccess.body.error).toBe('unauthenticated');
  });

  it('stops honouring a session or access token once the user is deactivated', async () => {
    const user = await makeUser(app);
    const { cookie } = await signIn(app, user.username, user.password);
    const token = (await app.http.post('/api/login', { username: user.username, password: user.password })).body.token;
    await app.services.users.setActive(user.username, false, { via: 'cli' });
    expect((await app.http.get('/api/user', { headers: { cookie: cookie! } })).status).toBe(401);
    expect((await app.http.get('/api/user', { headers: { authorization: `Bearer ${token}` } })).status).toBe(401);
    await app.services.users.setActive(user.username, false, { via: 'cli' }); // again: nobody to sign out, no second user.logout
    // deactivating signed them out everywhere: activated again, the old session and token stay dead
    await app.services.users.setActive(user.username, true, { via: 'cli' });
    expect((await app.http.get('/api/user', { headers: { cookie: cookie! } })).status).toBe(401);
    expect((await app.http.get('/api/user', { headers: { authorization: `Bearer ${token}` } })).status).toBe(401);
    const logout = (await auditRows(app, user.username)).filter((r) => r.action === 'user.logout');
    expect(logout.map((r) => r.details.reason)).toStrictEqual(['deactivated']);
  });
});

describe('sign-out', () => {
  let app: TestApp;
  let webhookId: number;
  beforeAll(async () => {
    app = await startTestApp();
    webhookId = await subscribe(app, ['user.logout']);
  });
  afterAll(() => app.close());

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
    expect(out.status, out.text).toBe(200);
    expect(out.body).toStrictEqual({ success: true });
    expect(String(out.headers['set-cookie']), 'the cookie is cleared').toMatch(/auth\.sid=;/);
    expect((await app.http.get('/api/user', { headers: { cookie: cookie! } })).status).toBe(401);
    const revoked = await validate(client, unused);
    expect(revoked.status).toBe(401);
    expect(revoked.body.error).toBe('token_revoked');

    const audit = (await auditRows(app, user.username)).filter((r) => r.action === 'user.logout');
    expect(audit.length).toBe(1);
    expect(audit[0].details.invalidated_tokens).toBe(1);
    const events = (await deliveries(app, webhookId, 'user.logout')).filter((d) => d.user_id === user.id);
    expect(events).toStrictEqual([{ user_id: user.id, email: user.email, ip_address: '127.0.0.1', client_system: 'auth-service' }]);
  });

  it('POST /api/auth/logout with a bearer access token revokes that token, not the user\'s other tokens or sessions', async () => {
    const user = await makeUser(app, { role: 'admin' });
    const bearer = async () => (await app.http.post('/api/login', { username: user.username, password: user.password })).body.token as string;
    const [leaving, staying] = [await bearer(), await bearer()];
    const { cookie } = await signIn(app, user.username, user.password);
    const as = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
    expect((await app.http.get('/api/admin/clients', as(leaving))).status).toBe(200);

    const out = await app.http.post('/api/auth/logout', undefined, as(leaving));
    expect(out.status, out.text).toBe(200);
    expect(out.body).toStrictEqual({ success: true });
    expect((await app.http.get('/api/user', as(leaving))).status, 'the token that signed out is refused').toBe(401);
    expect((await app.http.get('/api/admin/clients', as(leaving))).status, 'by the admin API too').toBe(401);
    expect((await app.http.get('/api/user', as(staying))).status, 'another access token of the user still works').toBe(200);
    expect((await app.http.get('/api/user', { headers: { cookie: cookie! } })).status, 'and their browser session').toBe(200);
    const again = await app.http.post('/api/auth/logout', undefined, as(leaving));
    expect(again.status, 'signing out again is harmless').toBe(200);
    const audit = (await auditRows(app, user.username)).filter((r) => r.action === 'user.logout');
    expect(audit.map((r) => r.details.access_token_revoked)).toStrictEqual([true]);
  });

  it('POST /api/auth/logout without a session is a harmless 200', async () => {
    const out = await app.http.post('/api/auth/logout');
    expect(out.status).toBe(200);
  });

  it('POST /api/sso/logout revokes that user\'s unused tokens, at every client', async () => {
    const portal = await makeClient(app);
    const shop = await makeClient(app);
    const user = await makeUser(app);
    const other = await makeUser(app);
    const consumed = await issue(portal, user.username);
    expect((await validate(portal, consumed)).status).toBe(200);
    const pendingPortal = await issue(portal, user.username);
    const pendingShop = await issue(shop, user.username);
    const otherUsers = await issue(portal, other.username);

    const out = await app.http.post('/api/sso/logout', { client_id: portal.client_id, client_secret: portal.client_secret, token: consumed });
    expect(out.status, out.text).toBe(200);
    expect(out.body).toStrictEqual({ success: true, invalidated_tokens: 2 });
    expect((await validate(portal, pendingPortal)).body.error).toBe('token_revoked');
    expect((await validate(shop, pendingShop)).body.error, 'the user\'s token for another client too').toBe('token_revoked');
    expect((await validate(portal, otherUsers)).status, 'another user\'s token is untouched').toBe(200);

    const events = (await deliveries(app, webhookId, 'user.logout')).filter((d) => d.user_id === user.id);
    expect(events).toStrictEqual([{ user_id: user.id, email: user.email, ip_address: '127.0.0.1', client_system: portal.client_id }]);
    const audit = (await auditRows(app, user.username)).filter((r) => r.action === 'user.logout');
    expect(audit.length).toBe(1);
  });

  it('POST /api/sso/logout with a server-to-server token has no browser session to end: the user\'s sessions stay, as its reference says', async () => {
    const portal = await makeClient(app);
    const user = await makeUser(app);
    const { cookie } = await signIn(app, user.username, user.password);
    const token = await issue(portal, user.username);
    const out = await app.http.post('/api/sso/logout', { client_id: portal.client_id, client_secret: portal.client_secret, token });
    expect(out.body).toStrictEqual({ success: true, invalidated_tokens: 1 });
    const profile = await app.http.get('/api/user', { headers: { cookie: cookie! } });
    expect(profile.status, 'a session not behind this token is not ended').toBe(200);

    const documented = (await app.http.get('/api/openapi.json')).body.paths['/api/sso/logout'].post;
    expect(documented.description).toMatch(/Ends the user's session at this service in the browser that signed in for that token/);
    expect(documented.description).toMatch(/sessions in other browsers are left/);
    expect(documented.responses['401'].description).toMatch(/invalid_token/);
  });

  it('POST /api/sso/logout accepts a token that has since expired', async () => {
    const portal = await makeClient(app);
    const user = await makeUser(app);
    const consumed = await issue(portal, user.username);
    expect((await validate(portal, consumed)).status).toBe(200);
    const pending = await issue(portal, user.username);
    // the same claims (same jti), expired an hour ago, signed with the service's key
    const claims = jose.decodeJwt(consumed);
    const key = new TextEncoder().encode(app.config.JWT_SECRET);
    const now = Math.floor(Date.now() / 1000);
    const expired = await new jose.SignJWT({ ...claims, iat: now - 7200, exp: now - 3600 }).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(key);
    const out = await app.http.post('/api/sso/logout', { client_id: portal.client_id, client_secret: portal.client_secret, token: expired });
    expect(out.status, out.text).toBe(200);
    expect((await validate(portal, pending)).body.error).toBe('token_revoked');
  });

  it('POST /api/sso/logout refuses bad credentials, another client\'s token and an access token', async () => {
    const portal = await makeClient(app);
    const shop = await makeClient(app);
    const user = await makeUser(app);
    const token = await issue(portal, user.username);
    const badSecret = await app.http.post('/api/sso/logout', { client_id: portal.client_id, client_secret: 'wrong', token });
    expect(badSecret.status).toBe(401);
    expect(badSecret.body.error).toBe('invalid_client');
    const otherClient = await app.http.post('/api/sso/logout', { client_id: shop.client_id, client_secret: shop.client_secret, token });
    expect(otherClient.status).toBe(401);
    expect(otherClient.body.error).toBe('invalid_token');
    const access = (await app.http.post('/api/login', { username: user.username, password: user.password })).body.token;
    const withAccess = await app.http.post('/api/sso/logout', { client_id: portal.client_id, client_secret: portal.client_secret, token: access });
    expect(withAccess.status).toBe(401);
    expect(withAccess.body.error).toBe('invalid_token');
    expect((await validate(portal, token)).status, 'nothing was revoked').toBe(200);
  });
});
