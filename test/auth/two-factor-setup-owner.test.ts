import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashResetToken } from '../../src/auth/password-service.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';
import { signIn, totpCode } from './support.ts';

/**
 * A two-factor setup not yet confirmed belongs to the session or access token that started it
 * (migrations/0022_totp_pending.sql): nobody else sees its secret or turns it on, it expires,
 * new credentials and a sign-out everywhere forget it, and turning two-factor on ends the
 * user's other sessions and access tokens. Before, one secret sat in the user's row: whoever
 * had the password or a session planted one, the owner's page showed it and their enabling
 * turned it on, and the planter signed in with its codes.
 */
describe('a two-factor setup belongs to the session or token that started it', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  const NEW_PASSWORD = 'four unrelated words here';

  async function session(user: { username: string; password: string }) {
    const { res, cookie } = await signIn(app, user.username, user.password);
    expect(res.status, res.text).toBe(200);
    return { cookie: cookie! };
  }
  async function bearer(user: { username: string; password: string }) {
    const r = await app.http.post('/api/login', { username: user.username, password: user.password });
    expect(r.status, r.text).toBe(200);
    return { authorization: `Bearer ${r.body.token}` };
  }
  const setup = async (headers: Record<string, string>) => {
    const r = await app.http.post('/api/user/2fa/setup', undefined, { headers });
    expect(r.status, r.text).toBe(200);
    return r.body.secret as string;
  };
  const enable = async (headers: Record<string, string>, secret: string, password: string) =>
    app.http.post('/api/user/2fa/enable', { code: await totpCode(secret, -1), current_password: password }, { headers });
  const enabled = async (id: number) => (await app.db.query<{ totp_enabled: boolean }>('SELECT totp_enabled FROM users WHERE id = $1', [id])).rows[0].totp_enabled;
  const pendingRows = async (id: number) => Number((await app.db.query<{ n: string }>('SELECT count(*) AS n FROM totp_pending WHERE user_id = $1', [id])).rows[0].n);

  /** The security page of a browser with this session cookie. */
  async function securityPage(cookie: string) {
    const page = formSession(app.app);
    page.cookies.set('auth.sid', cookie.slice('auth.sid='.length));
    return { page, res: await page.get('/account/security') };
  }

  it('is neither shown to nor enabled by another session of the same user; its own session enables it', async () => {
    const user = await makeUser(app);
    const planter = await session(user);
    const owner = await session(user);
    const planted = await setup(planter);

    const seen = await securityPage(owner.cookie);
    expect(seen.res.status).toBe(200);
    expect(seen.res.text, 'the other session\'s secret is not on the owner\'s page').not.toContain(planted);
    expect(seen.res.text).not.toMatch(/data-field="totp-secret"/);
    const refused = await enable(owner, planted, user.password);
    expect([refused.status, refused.body.error], refused.text).toStrictEqual([409, 'totp_setup_required']);
    // the owner's page form says the same: as if no setup were started
    const csrf = hiddenField(seen.res.text, '_csrf');
    const viaPage = await seen.page.post('/account/security/totp/enable', { _csrf: csrf, code: await totpCode(planted, -1), current_password: user.password });
    expect(viaPage.status).toBe(303);
    expect(await enabled(user.id)).toBe(false);

    // the planter's own session sees its setup and may turn it on
    const shown = (await securityPage(planter.cookie)).res.text.match(/data-field="totp-secret"[^>]*>([^<]*)</)?.[1].replace(/\s+/g, '');
    expect(shown).toBe(planted);
    const own = await enable(planter, planted, user.password);
    expect(own.status, own.text).toBe(200);
    expect(await enabled(user.id)).toBe(true);
  });

  it('the page\'s setup is shown to its session only, and an access token\'s setup to none but that token', async () => {
    const user = await makeUser(app);
    const browser = await session(user);
    const other = await session(user);
    const { page, res } = await securityPage(browser.cookie);
    expect((await page.post('/account/security/totp/setup', { _csrf: hiddenField(res.text, '_csrf') })).status).toBe(303);
    const mine = (await page.get('/account/security')).text.match(/data-field="totp-secret"[^>]*>([^<]*)</)?.[1].replace(/\s+/g, '');
    expect(mine, 'the session that started it sees it').toBeTruthy();
    expect((await securityPage(other.cookie)).res.text).not.toMatch(/data-field="totp-secret"/);

    const token = await bearer(user);
    const secret = await setup(token);
    expect((await securityPage(browser.cookie)).res.text, 'a token\'s setup is not on any page').not.toContain(secret);
    // the session has a setup of its own: the token's code is checked against that one
    const withToken = await enable(browser, secret, user.password);
    expect([withToken.status, withToken.body.error], 'nor enabled by a session').toStrictEqual([400, 'invalid_totp']);
    expect((await enable(other, mine!, user.password)).status, 'nor the page\'s by another session').toBe(409);
    expect(await enabled(user.id)).toBe(false);
  });

  it('expires: a setup older than its ten minutes is neither shown nor enabled', async () => {
    const user = await makeUser(app);
    const headers = await session(user);
    const secret = await setup(headers);
    const row = (await app.db.query<{ minutes: number }>(
      'SELECT round(extract(epoch FROM expires_at - created_at) / 60)::int AS minutes FROM totp_pending WHERE user_id = $1', [user.id])).rows[0];
    expect(row.minutes).toBe(10);
    await app.db.query("UPDATE totp_pending SET created_at = now() - interval '11 minutes', expires_at = now() - interval '1 minute' WHERE user_id = $1", [user.id]);
    expect((await securityPage(headers.cookie)).res.text).not.toMatch(/data-field="totp-secret"/);
    const refused = await enable(headers, secret, user.password);
    expect([refused.status, refused.body.error]).toStrictEqual([409, 'totp_setup_required']);
  });

  it('is forgotten by a password change, a password reset and a sign-out everywhere', async () => {
    // a sign-out everywhere, from the very session that set up
    const a = await makeUser(app);
    const aSession = await session(a);
    const aSecret = await setup(aSession);
    await setup(await session(a));
    expect((await app.http.post('/api/user/sessions/revoke-all', undefined, { headers: aSession })).status).toBe(200);
    expect(await pendingRows(a.id)).toBe(0);
    expect((await enable(aSession, aSecret, a.password)).status, 'the kept session starts again').toBe(409);

    // a password change
    const b = await makeUser(app);
    const bToken = await bearer(b);
    await setup(bToken);
    await setup(await session(b));
    expect((await app.http.post('/api/user/password', { current_password: b.password, new_password: NEW_PASSWORD }, { headers: await session(b) })).status).toBe(200);
    expect(await pendingRows(b.id)).toBe(0);

    // a password reset
    const c = await makeUser(app);
    await setup(await session(c));
    const token = randomBytes(32).toString('base64url');
    await app.db.query("INSERT INTO password_resets (user_id, token_hash, expires_at) VALUES ($1, $2, now() + interval '15 minutes')", [c.id, hashResetToken(token)]);
    const reset = await app.http.post('/api/auth/password/reset', { token, new_password: NEW_PASSWORD });
    expect(reset.status, reset.text).toBe(200);
    expect(await pendingRows(c.id)).toBe(0);
  });

  it('turning it on ends the user\'s other sessions and access tokens, and keeps the session that did it', async () => {
    const user = await makeUser(app);
    const other = await session(user);
    const token = await bearer(user);
    const mine = await session(user);
    await setup(other); // another session's setup: forgotten too
    const on = await enable(mine, await setup(mine), user.password);
    expect(on.status, on.text).toBe(200);
    expect(on.body.access_token, 'a session is kept, not given a token').toBeUndefined();
    expect((await app.http.get('/api/user', { headers: mine })).status, 'this session stays').toBe(200);
    expect((await app.http.get('/api/user', { headers: other })).status, 'the other session ended').toBe(401);
    expect((await app.http.get('/api/user', { headers: token })).status, 'the access token stopped working').toBe(401);
    expect(await pendingRows(user.id)).toBe(0);
  });

  it('turned on with an access token, the others end and that token is given its successor', async () => {
    const user = await makeUser(app);
    const other = await session(user);
    const token = await bearer(user);
    const on = await enable(token, await setup(token), user.password);
    expect(on.status, on.text).toBe(200);
    expect(on.body.access_token).toMatchObject({ token_type: 'Bearer' });
    expect((await app.http.get('/api/user', { headers: token })).status, 'every token issued before stopped').toBe(401);
    expect((await app.http.get('/api/user', { headers: { authorization: `Bearer ${on.body.access_token.token}` } })).status).toBe(200);
    expect((await app.http.get('/api/user', { headers: other })).status).toBe(401);
  });
});
