import bcrypt from 'bcrypt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';
import { attemptRow, auditRows, deliveries, sessionCookie, signIn, subscribe, totpCode } from '../auth/support.ts';

const NEW_PASSWORD = 'four unrelated words here';

describe('changing a password', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ LOCKOUT_THRESHOLD: '3' });
  });
  afterAll(() => app?.close());

  const change = (cookie: string | undefined, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    app.http.post('/api/user/password', body, { headers: { ...(cookie ? { cookie } : {}), ...headers } });

  /**
   * Stores the user's password hashed at a high cost: each check of it spends a second or more
   * in bcrypt, and what the test does 300 ms later (meanwhile) lands while it runs.
   */
  const slowHash = async (user: { id: number; password: string }) =>
    app.db.query('UPDATE users SET password_hash = $2 WHERE id = $1', [user.id, await bcrypt.hash(user.password, 14)]);
  const meanwhile = () => new Promise((resolve) => setTimeout(resolve, 300));

  /**
   * Starts a session sign-in and a token sign-in with the right password; resolves once both are
   * in bcrypt, with their answers to come (wrapped: an awaited promise would wait for them).
   */
  async function signInsUnderWay(user: { username: string; password: string }) {
    const answers = Promise.all([
      app.http.post('/api/auth/login', { login: user.username, password: user.password }),
      app.http.post('/api/login', { username: user.username, password: user.password }),
    ]);
    await meanwhile();
    return { answers };
  }

  it('refuses a wrong current password and counts it as a failed sign-in, up to the lockout', async () => {
    const user = await makeUser(app);
    const { cookie } = await signIn(app, user.username, user.password);
    for (let i = 1; i <= 3; i++) {
      const r = await change(cookie, { current_password: 'not my password', new_password: NEW_PASSWORD });
      // the attempt that sets the lock is refused as a wrong password, and says so
      expect(r.status).toBe(401);
      expect(r.body.error).toBe('invalid_credentials');
      expect(r.body.locked).toBe(i < 3 ? undefined : true);
    }
    expect((await attemptRow(app, user.username))?.locked_until, 'locked after LOCKOUT_THRESHOLD failures').toBeTruthy();
    const locked = await change(cookie, { current_password: user.password, new_password: NEW_PASSWORD });
    expect(locked.status).toBe(423);
    expect((await signIn(app, user.username, user.password)).res.status).toBe(423);
    const failures = (await auditRows(app, user.username)).filter((r) => r.action === 'user.login' && r.outcome === 'failure');
    expect(failures.slice(0, 3).map((r) => [r.details.via, r.details.reason])).toStrictEqual(Array(3).fill(['password_change', 'invalid_password']));
  });

  it('after a change the old password fails, the new one works, and the other sessions and tokens of the user end', async () => {
    const user = await makeUser(app);
    const client = await makeClient(app);
    const hook = await subscribe(app, ['user.logout']);
    const here = await signIn(app, user.username, user.password);
    const elsewhere = await signIn(app, user.username, user.password);
    const bearer = (await app.http.post('/api/login', { username: user.username, password: user.password })).body.token;
    const sso = await app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username: user.username });
    expect((await app.http.get('/api/user', { headers: { authorization: `Bearer ${bearer}` } })).status).toBe(200);

    const r = await change(here.cookie, { current_password: user.password, new_password: NEW_PASSWORD });
    expect(r.status).toBe(200);
    expect(r.body).toStrictEqual({ success: true });

    const renewed = sessionCookie(r);
    expect(renewed, 'this session goes on under a new id').toMatch(/^auth\.sid=/);
    expect(renewed).not.toBe(here.cookie);
    expect((await app.http.get('/api/user', { headers: { cookie: renewed! } })).status, 'this session stays').toBe(200);
    expect((await app.http.get('/api/user', { headers: { cookie: here.cookie! } })).status, 'its id from before the change is worthless').toBe(401);
    expect((await app.http.get('/api/user', { headers: { cookie: elsewhere.cookie! } })).status, 'the other session ended').toBe(401);
    expect((await app.http.get('/api/user', { headers: { authorization: `Bearer ${bearer}` } })).status, 'an older access token is refused').toBe(401);
    const validated = await app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token: sso.body.token });
    expect(validated.body).toMatchObject({ valid: false, error: 'token_revoked' });
    expect((await signIn(app, user.username, user.password)).res.status).toBe(401);
    expect((await signIn(app, user.username, NEW_PASSWORD)).res.status).toBe(200);

    const actions = (await auditRows(app, user.username)).map((row) => row.action);
    expect(actions).toContain('user.password_change');
    expect(JSON.stringify(await auditRows(app, user.username))).not.toContain(NEW_PASSWORD);
    expect(await deliveries(app, hook, 'user.logout')).toStrictEqual([{ user_id: user.id, email: user.email, ip_address: '127.0.0.1', client_system: 'auth-service' }]);
  });

  it('a sign-in with the old password that is still checking it when a new password is set is refused: no session, no access token', async () => {
    const user = await makeUser(app);
    await slowHash(user);
    const signIns = await signInsUnderWay(user);
    await app.services.users.setPassword({ id: user.id }, { password: NEW_PASSWORD }, { via: 'cli', username: 'test' });
    const [session, token] = await signIns.answers;
    expect([session.status, session.body.error], 'the password it checked is no longer the password').toStrictEqual([401, 'invalid_credentials']);
    expect([token.status, token.body.error]).toStrictEqual([401, 'invalid_credentials']);
    expect(sessionCookie(session)).toBe(undefined);
    expect((await app.db.query('SELECT 1 FROM sessions WHERE user_id = $1', [user.id])).rowCount, 'no session').toBe(0);
    expect((await signIn(app, user.username, NEW_PASSWORD)).res.status, 'the new password works').toBe(200);
  });

  it('a sign-in still checking the password when an administrator asks for a new one gets no session or token, but the change form', async () => {
    const user = await makeUser(app);
    await slowHash(user);
    const signIns = await signInsUnderWay(user);
    await app.services.users.setPassword({ id: user.id }, { mustChange: true }, { via: 'cli', username: 'test' });
    const [session, token] = await signIns.answers;
    expect([session.status, session.body.error], session.text).toStrictEqual([403, 'password_change_required']);
    expect([token.status, token.body.error], token.text).toStrictEqual([403, 'password_change_required']);
    expect(sessionCookie(session)).toBe(undefined);
    expect((await app.db.query('SELECT 1 FROM sessions WHERE user_id = $1', [user.id])).rowCount, 'no session').toBe(0);
  });

  it('a lock set while the right current password is being checked wins: no change of a locked account\'s password, no must-change answer', async () => {
    const user = await makeUser(app);
    // the lock that concurrent wrong guesses would set lands while the right password is checked
    await slowHash(user);
    const lockMeanwhile = async () => {
      await meanwhile();
      await app.db.query(
        `INSERT INTO login_attempts (login, failed_count, locked_until, updated_at) VALUES ($1, 3, now() + interval '30 minutes', now())
         ON CONFLICT (login) DO UPDATE SET failed_count = 3, locked_until = EXCLUDED.locked_until`, [user.username]);
    };
    const byLogin = change(undefined, { login: user.username, current_password: user.password, new_password: NEW_PASSWORD });
    await lockMeanwhile();
    const changed = await byLogin;
    expect([changed.status, changed.body.error], changed.text).toStrictEqual([423, 'account_locked']);
    const hash = (await app.db.query<{ password_hash: string }>('SELECT password_hash FROM users WHERE id = $1', [user.id])).rows[0].password_hash;
    expect(await bcrypt.compare(user.password, hash), 'the password is unchanged').toBe(true);

    // an administrator's temporary password: the right one must not be told apart from the guesses
    await app.db.query('DELETE FROM login_attempts WHERE login = $1', [user.username]);
    await app.db.query('UPDATE users SET must_change_password = true WHERE id = $1', [user.id]);
    const signIn = app.http.post('/api/auth/login', { login: user.username, password: user.password });
    await lockMeanwhile();
    const answer = await signIn;
    expect([answer.status, answer.body.error], answer.text).toStrictEqual([423, 'account_locked']);
  });

  it('a sign-in still checking the password when the user is deactivated is refused, and stays so once they are active again', async () => {
    const user = await makeUser(app);
    await slowHash(user);
    const bySession = app.http.post('/api/auth/login', { login: user.username, password: user.password });
    await meanwhile();
    await app.services.users.setActive(user.username, false, { via: 'cli', username: 'test' });
    const session = await bySession;
    expect([session.status, session.body.error]).toStrictEqual([401, 'invalid_credentials']);
    await app.services.users.setActive(user.username, true, { via: 'cli', username: 'test' });
    expect((await app.db.query('SELECT 1 FROM sessions WHERE user_id = $1', [user.id])).rowCount, 'no session to revive').toBe(0);
  });

  it('of several changes at once with the same current password one succeeds; the others are refused, not reported done', async () => {
    for (let round = 0; round < 4; round++) {
      const user = await makeUser(app);
      const { cookie } = await signIn(app, user.username, user.password);
      const answers = await Promise.all(Array.from({ length: 5 }, (_, i) => change(cookie, { current_password: user.password, new_password: `${NEW_PASSWORD} ${i}` })));
      const done = answers.flatMap((r, i) => (r.status === 200 ? [i] : []));
      expect(done, answers.map((r) => `${r.status} ${r.text}`).join('\n')).toHaveLength(1);
      // the others: the current password no longer is (401), or the lock their failures set (423)
      for (const r of answers.filter((a) => a.status !== 200)) expect([401, 423], r.text).toContain(r.status);
      const row = (await app.db.query<{ password_hash: string }>('SELECT password_hash FROM users WHERE id = $1', [user.id])).rows[0];
      expect(await bcrypt.compare(`${NEW_PASSWORD} ${done[0]}`, row.password_hash), 'the password is the one reported set').toBe(true);
    }
  });

  it('works with a bearer access token; that token stops working afterwards', async () => {
    const user = await makeUser(app);
    const bearer = (await app.http.post('/api/login', { username: user.username, password: user.password })).body.token;
    const r = await change(undefined, { current_password: user.password, new_password: NEW_PASSWORD }, { authorization: `Bearer ${bearer}` });
    expect(r.status).toBe(200);
    expect((await app.http.get('/api/user', { headers: { authorization: `Bearer ${bearer}` } })).status).toBe(401);
    const fresh = (await app.http.post('/api/login', { username: user.username, password: NEW_PASSWORD })).body.token;
    expect((await app.http.get('/api/user', { headers: { authorization: `Bearer ${fresh}` } })).status).toBe(200);
  });

  it('refuses weak new passwords, saying what to fix', async () => {
    const user = await makeUser(app);
    const { cookie } = await signIn(app, user.username, user.password);
    const cases: Array<[string, RegExp]> = [
      ['short one', /at least 10 characters/],
      ['iloveyou123', /most commonly used/],
      ['Pass Word 1234', /most commonly used/],
      [user.username.toUpperCase(), /not be the username/],
      [user.email, /not be the email/],
      ['é'.repeat(40), /at most 72 bytes/],
      [user.password, /differ from the current/],
    ];
    for (const [weak, why] of cases) {
      const r = await change(cookie, { current_password: user.password, new_password: weak });
      expect(r.status, weak).toBe(400);
      expect(r.body.error).toBe('invalid_password');
      expect(r.body.message).toMatch(why);
    }
    expect((await signIn(app, user.username, user.password)).res.status, 'nothing changed').toBe(200);
  });

  it('with a login instead of a session, a two-factor user must give their code too', async () => {
    const user = await makeUser(app);
    const { cookie } = await signIn(app, user.username, user.password);
    const json = { cookie: cookie!, 'content-type': 'application/json' };
    const { secret } = (await app.http.post('/api/user/2fa/setup', undefined, { headers: json })).body;
    expect((await app.http.post('/api/user/2fa/enable', { code: await totpCode(secret), current_password: user.password }, { headers: json })).status).toBe(200);

    const withoutCode = await change(undefined, { login: user.username, current_password: user.password, new_password: NEW_PASSWORD });
    expect(withoutCode.status).toBe(401);
    expect(withoutCode.body.error).toBe('totp_required');
    const withCode = await change(undefined, { login: user.username, current_password: user.password, new_password: NEW_PASSWORD, totp: await totpCode(secret, 1) });
    expect(withCode.status).toBe(200);
    expect((await app.http.get('/api/user', { headers: { cookie: cookie! } })).status, 'no session was kept: all ended').toBe(401);
  });

  it('a two-factor user who must change the password is told that the code given is spent; a recovery code does the change', async () => {
    const user = await makeUser(app);
    const { cookie } = await signIn(app, user.username, user.password);
    const json = { cookie: cookie!, 'content-type': 'application/json' };
    const { secret } = (await app.http.post('/api/user/2fa/setup', undefined, { headers: json })).body;
    const enabled = await app.http.post('/api/user/2fa/enable', { code: await totpCode(secret), current_password: user.password }, { headers: json });
    expect(enabled.status).toBe(200);
    await app.services.users.setPassword({ id: user.id }, { mustChange: true }, { via: 'cli', username: 'test' });

    const refused = await app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: await totpCode(secret, 1) });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toMatch(/code you gave is used up: send the next one/);
    expect(refused.body.change_password.body).toContain('totp (the next code, or a recovery code)');
    const withoutSecondFactor = await app.http.post('/api/auth/login', { login: user.username, password: user.password });
    expect(withoutSecondFactor.body.error, 'the code is asked before the change is').toBe('totp_required');

    const changed = await change(undefined, { login: user.username, current_password: user.password, new_password: NEW_PASSWORD, totp: enabled.body.recovery_codes[0] });
    expect(changed.status, changed.text).toBe(200);
  });

  it('answers 401 to a caller who is neither signed in nor gives a login', async () => {
    const r = await change(undefined, { current_password: 'whatever it is', new_password: NEW_PASSWORD });
    expect(r.status).toBe(401);
    expect(r.body.error).toBe('unauthenticated');
  });

  it('the page: the dashboard links to /account/password, which changes the password', async () => {
    const user = await makeUser(app);
    const browser = formSession(await app.listen());
    const login = await browser.get('/login');
    expect((await browser.post('/login', { _csrf: hiddenField(login.text, '_csrf'), step: 'password', login: user.username, password: user.password })).status).toBe(303);
    const dashboard = await browser.get('/dashboard');
    expect(dashboard.text).toContain('href="/account/password"');
    expect(dashboard.text).toContain('href="/account/sessions"');

    const form = await browser.get('/account/password');
    expect(form.status).toBe(200);
    const csrf = hiddenField(form.text, '_csrf');
    const wrong = await browser.post('/account/password', { _csrf: csrf, current_password: 'not it at all', new_password: NEW_PASSWORD, confirm_password: NEW_PASSWORD });
    expect(wrong.status).toBe(401);
    expect(wrong.text).toContain('The current password is wrong.');
    const mismatch = await browser.post('/account/password', { _csrf: csrf, current_password: user.password, new_password: NEW_PASSWORD, confirm_password: 'other words' });
    expect(mismatch.status).toBe(400);
    const weak = await browser.post('/account/password', { _csrf: csrf, current_password: user.password, new_password: 'short', confirm_password: 'short' });
    expect(weak.status).toBe(400);
    expect(weak.text).toContain('at least 10 characters');
    const before = browser.cookies.get('auth.sid');
    const done = await browser.post('/account/password', { _csrf: csrf, current_password: user.password, new_password: NEW_PASSWORD, confirm_password: NEW_PASSWORD });
    expect(done.status).toBe(303);
    expect(done.headers.location).toBe('/account/password');
    expect(browser.cookies.get('auth.sid'), 'a new session id after the change').not.toBe(before);
    expect((await browser.get('/account/password')).text).toContain('Your password was changed');
    const old = await app.http.get('/api/user', { headers: { cookie: `auth.sid=${before}` } });
    expect(old.status, 'the id from before the change is worthless').toBe(401);
    expect((await signIn(app, user.username, NEW_PASSWORD)).res.status).toBe(200);
  });

  it('sends a visitor who is not signed in from /account/password to the sign-in page and back', async () => {
    const r = await app.http.get('/account/password', { headers: { accept: 'text/html' } });
    expect(r.status).toBe(303);
    expect(r.headers.location).toBe('/login?next=/account/password');
  });
});

describe('a recovery code given with a password change that is refused (a review helper)', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());

  it('stays unused when the new password breaks the policy (400): nothing was changed', async () => {
    const user = await makeUser(app);
    const { cookie } = await signIn(app, user.username, user.password);
    const headers = { cookie: cookie! };
    const { secret } = (await app.http.post('/api/user/2fa/setup', undefined, { headers })).body;
    const enabled = await app.http.post('/api/user/2fa/enable', { code: await totpCode(secret, -1), current_password: user.password }, { headers });
    expect(enabled.status, enabled.text).toBe(200);
    const [code] = enabled.body.recovery_codes as string[];
    const unused = async () => (await app.db.query<{ n: number }>('SELECT count(*)::int AS n FROM recovery_codes WHERE user_id = $1 AND used_at IS NULL', [user.id])).rows[0].n;
    expect(await unused()).toBe(10);
    for (const newPassword of ['short', user.password]) {
      const refused = await app.http.post('/api/user/password', { login: user.username, current_password: user.password, new_password: newPassword, totp: code });
      expect([refused.status, refused.body.error], newPassword).toStrictEqual([400, 'invalid_password']);
    }
    expect(await unused(), 'the code is still unused').toBe(10);
    const again = await app.http.post('/api/user/password', { login: user.username, current_password: user.password, new_password: NEW_PASSWORD, totp: code });
    expect(again.status, again.text).toBe(200);
    expect(await unused()).toBe(9);
  });
});
