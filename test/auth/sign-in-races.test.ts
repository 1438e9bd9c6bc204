import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { saveSignedInSession } from '../../src/http/session-store-queries.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { withClockBehind } from '../helpers/clock.ts';
import { onPostgres } from '../helpers/db.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { holdLocks, waitForLockWaiters } from '../helpers/locks.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';
import { sessionCookie as sessionCookieOf, subscribe } from './support.ts';

const NEW_PASSWORD = 'four unrelated words here';
const CLI = { via: 'cli' as const, username: 'test' };

/**
 * A sign-in is checked in one transaction and makes its session or access token after it
 * commits; a sign-out is one transaction too. These are the orders in which the two can
 * meet, with the one that lost never leaving a credential that still works.
 */
describe('sign-in and sign-out meeting each other', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());

  const bearerAnswer = (token: string) => app.http.get('/api/user', { headers: { authorization: `Bearer ${token}` } });
  const userSessions = async (userId: number) => (await app.db.query('SELECT 1 FROM sessions WHERE user_id = $1', [userId])).rowCount;
  const credentialsVersion = async (userId: number) =>
    (await app.db.query<{ v: string }>(
      "SELECT COALESCE((extract(epoch FROM password_changed_at) * 1000000)::bigint::text, '0') AS v FROM users WHERE id = $1", [userId],
    )).rows[0].v;

  it('an access token made by a sign-in that saw the credentials before a change is refused, though it was signed after the change', async () => {
    const user = await makeUser(app);
    const before = (await app.http.post('/api/login', { username: user.username, password: user.password })).body.token as string;
    expect((await bearerAnswer(before)).status).toBe(200);
    // a change committed between that sign-in's check and its signing: dated (as PostgreSQL
    // dates it, at its transaction's start) before the token was signed
    await app.db.query("UPDATE users SET password_changed_at = now() - interval '1 hour' WHERE id = $1", [user.id]);
    expect((await bearerAnswer(before)).status, 'signed after the change, but for the credentials before it').toBe(401);
    const after = (await app.http.post('/api/login', { username: user.username, password: user.password })).body.token as string;
    expect((await bearerAnswer(after)).status, 'a sign-in that saw the change works').toBe(200);
  });

  it('an access token signed in with the new password works though this host\'s clock is behind the database\'s (a review helper)', async () => {
    const u = await makeUser(app);
    const first = await app.http.post('/api/login', { username: u.username, password: u.password });
    expect(first.status, first.text).toBe(200);
    const newPassword = 'another long passphrase 42';
    const changed = await app.http.post('/api/user/password', { current_password: u.password, new_password: newPassword },
      { headers: { authorization: `Bearer ${first.body.token}` } });
    expect(changed.status, changed.text).toBe(200);
    // signed by this host's clock 2 s before the change's time, which the database's clock gave
    const fresh = await withClockBehind(2, () => app.http.post('/api/login', { username: u.username, password: newPassword }));
    expect(fresh.status, fresh.text).toBe(200);
    const me = await app.http.get('/api/user', { headers: { authorization: `Bearer ${fresh.body.token}` } });
    expect(me.status, me.text).toBe(200);
    expect((await app.http.get('/api/user', { headers: { authorization: `Bearer ${first.body.token}` } })).status, 'the token from before the change is still refused').toBe(401);
  });

  it('a signed-in session is saved only while the credentials are of the version its sign-in saw', async () => {
    const user = await makeUser(app);
    const seen = await credentialsVersion(user.id);
    const sess = (sid: string) => JSON.stringify({ cookie: { path: '/' }, userId: user.id, credentialsVersion: seen, sid });
    const expire = new Date(Date.now() + 3_600_000);
    expect(await saveSignedInSession(app.db, 'race-current', sess('race-current'), expire, { userId: user.id, credentialsVersion: seen })).toBe(true);
    await app.services.users.setPassword({ id: user.id }, { password: NEW_PASSWORD }, CLI);
    expect(await credentialsVersion(user.id)).not.toBe(seen);
    expect(await saveSignedInSession(app.db, 'race-stale', sess('race-stale'), expire, { userId: user.id, credentialsVersion: seen })).toBe(false);
    const rows = await app.db.query<{ sid: string }>('SELECT sid FROM sessions WHERE user_id = $1', [user.id]);
    expect(rows.rows, 'the one saved before the change ended with it; the late one was never written').toStrictEqual([]);
  });

  it('a sign-in whose session is refused answers 401 and tries to save that session once, not again as the answer ends', async () => {
    const user = await makeUser(app);
    // a password set just before the sign-in's session is saved (through the app's own database handle)
    const db = app.db as { query: (...args: unknown[]) => Promise<unknown> };
    const query = db.query;
    let attempts = 0;
    db.query = async function (this: unknown, ...args: unknown[]) {
      const sql = String(args[0]);
      if (sql.includes('INSERT INTO sessions') && sql.includes('FROM users')) {
        attempts++;
        if (attempts === 1) await app.services.users.setPassword({ id: user.id }, { password: NEW_PASSWORD }, CLI);
      }
      return query.apply(this, args);
    };
    try {
      const r = await app.http.post('/api/auth/login', { login: user.username, password: user.password });
      expect([r.status, r.body.error], r.text).toStrictEqual([401, 'invalid_credentials']);
      const cookie = sessionCookieOf(r);
      if (cookie) expect((await app.http.get('/api/user', { headers: { cookie } })).status, 'whatever cookie it got signs nobody in').toBe(401);
      await new Promise((resolve) => setTimeout(resolve, 100));
    } finally {
      db.query = query;
    }
    expect(attempts, 'one save of the refused session').toBe(1);
    expect(await userSessions(user.id)).toBe(0);
  });

  it.runIf(onPostgres)('sign-ins still committing when a new password is set get no session and no working token, however late they make them', async () => {
    const user = await makeUser(app);
    const browser = formSession(app.app);
    const page = await browser.get('/login');
    expect(page.status).toBe(200);
    // both sign-ins' commits clear this row: holding it stops them after the password check, still holding the user's row
    await app.db.query('INSERT INTO login_attempts (login, failed_count) VALUES ($1, 0)', [user.username]);
    const releaseAttempts = await holdLocks(app.db, 'SELECT 1 FROM login_attempts WHERE login = $1 FOR UPDATE', [user.username]);
    // an anonymous sign-in page stores no session (its form token is a signed cookie): the page's
    // sign-in saves its session right after its commit, before or after the change commits

    const pageSignIn = browser.post('/login', { _csrf: hiddenField(page.text, '_csrf'), step: 'password', login: user.username, password: user.password });
    const tokenSignIn = app.http.post('/api/login', { username: user.username, password: user.password });
    await waitForLockWaiters(app.db, 2);
    const setting = app.services.users.setPassword({ id: user.id }, { password: NEW_PASSWORD }, CLI);
    await waitForLockWaiters(app.db, 3); // the change waits for the sign-ins' commits
    await releaseAttempts();
    await setting; // committed after both sign-ins
    const token = await tokenSignIn;
    const signedIn = await pageSignIn;

    // each loser on its own: the token, then the session
    expect(token.status, token.text).toBe(200);
    expect.soft((await bearerAnswer(token.body.token)).status, 'its token is worthless').toBe(401);
    if (signedIn.status === 303) {
      // saved before the change committed: the change ended it, and the browser is signed out
      const after = await browser.get('/dashboard');
      expect.soft(after.status, 'the session it saved no longer works').toBe(303);
      expect.soft(after.headers.location).toMatch(/^\/login/);
    } else {
      expect.soft(signedIn.status, 'the page asks for the password again').toBe(401);
      expect.soft(signedIn.headers.location).toBe(undefined);
    }
    expect.soft(await userSessions(user.id), 'no session').toBe(0);
    // the new password works as usual
    const fresh = await app.http.post('/api/login', { username: user.username, password: NEW_PASSWORD });
    expect((await bearerAnswer(fresh.body.token)).status).toBe(200);
  });

  describe.runIf(onPostgres)('a token issued at /sso/login while the same browser signs out', () => {
    async function signedInBrowser(user: { username: string; password: string }, client: { client_id: string }) {
      const browser = formSession(app.app);
      const page = await browser.get(`/sso/login?client_id=${client.client_id}`);
      const answer = await browser.post('/sso/login', {
        _csrf: hiddenField(page.text, '_csrf'), step: 'password', client_id: client.client_id, login: user.username, password: user.password,
      });
      expect(answer.status, answer.text).toBe(303);
      return browser;
    }
    const usableTokens = async (userId: number) =>
      (await app.db.query('SELECT 1 FROM sso_tokens WHERE user_id = $1 AND used_at IS NULL AND invalidated_at IS NULL', [userId])).rowCount;

    it('is invalidated with the others when the issue was first', async () => {
      const user = await makeUser(app);
      const client = await makeClient(app);
      const browser = await signedInBrowser(user, client);
      await app.db.query('UPDATE sso_tokens SET used_at = now() WHERE user_id = $1', [user.id]);
      // the user.login event reads its webhook's row (FOR KEY SHARE, for the delivery's
      // key) after it took the session's: holding that row stops the issue just before it commits
      const webhook = await subscribe(app, ['user.login']);
      let answers: Awaited<ReturnType<typeof browser.get>>[];
      try {
        const release = await holdLocks(app.db, 'SELECT 1 FROM webhooks WHERE id = $1 FOR UPDATE', [webhook]);
        const issuing = browser.get(`/sso/login?client_id=${client.client_id}`);
        await waitForLockWaiters(app.db, 1);
        const signingOut = browser.get('/sso/logout');
        // the sign-out waits for the issue, or (had it not to) is through already
        await Promise.race([signingOut, waitForLockWaiters(app.db, 2)]);
        await release();
        answers = await Promise.all([issuing, signingOut]);
      } finally {
        await app.db.query('UPDATE webhooks SET active = false WHERE id = $1', [webhook]);
      }
      const [issued, out] = answers;
      expect(out.status).toBe(200);
      expect(issued.status, issued.text).toBe(303);
      const token = new URL(issued.headers.location!).searchParams.get('token');
      const validated = await app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token });
      expect(validated.body).toMatchObject({ valid: false, error: 'token_revoked' });
      expect(await usableTokens(user.id)).toBe(0);
    });

    it('meets a password change holding the user\'s row without a deadlock: the token is issued, then invalidated by the change', async () => {
      const user = await makeUser(app);
      const client = await makeClient(app);
      const browser = await signedInBrowser(user, client);
      const bearer = (await app.http.post('/api/login', { username: user.username, password: user.password })).body.token as string;
      // the change locks the user's row first, then clears this row: holding it stops the change there
      await app.db.query('INSERT INTO login_attempts (login, failed_count) VALUES ($1, 0)', [user.username]);
      const release = await holdLocks(app.db, 'SELECT 1 FROM login_attempts WHERE login = $1 FOR UPDATE', [user.username]);
      const changing = app.http.post('/api/user/password', { current_password: user.password, new_password: NEW_PASSWORD }, { headers: { authorization: `Bearer ${bearer}` } });
      await waitForLockWaiters(app.db, 1);
      // the issue holds the browser's session row (its token's row no longer locks the user's)
      const issuing = browser.get(`/sso/login?client_id=${client.client_id}`);
      await Promise.race([issuing, waitForLockWaiters(app.db, 2)]);
      await release();
      const [changed, issued] = await Promise.all([changing, issuing]);
      expect(changed.status, changed.text).toBe(200);
      expect(issued.status, issued.text.slice(0, 300)).toBe(303);
      const token = new URL(issued.headers.location!, 'http://x').searchParams.get('token');
      if (token) {
        const validated = await app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token });
        expect(validated.body).toMatchObject({ valid: false, error: 'token_revoked' });
      }
      expect(await usableTokens(user.id)).toBe(0);
    });

    it('is not issued when the sign-out was first', async () => {
      const user = await makeUser(app);
      const client = await makeClient(app);
      const browser = await signedInBrowser(user, client);
      // the sign-out invalidates this unused token: holding its row stops the sign-out before it commits
      const jti = (await app.db.query<{ jti: string }>('SELECT jti FROM sso_tokens WHERE user_id = $1', [user.id])).rows[0].jti;
      const release = await holdLocks(app.db, 'SELECT 1 FROM sso_tokens WHERE jti = $1 FOR UPDATE', [jti]);
      const signingOut = browser.get('/sso/logout');
      await waitForLockWaiters(app.db, 1);
      const issuing = browser.get(`/sso/login?client_id=${client.client_id}`);
      await Promise.race([issuing, waitForLockWaiters(app.db, 2)]);
      await release();
      const [issued, out] = await Promise.all([issuing, signingOut]);
      expect(out.status).toBe(200);
      // signed out meanwhile: no token, the sign-in page for that client system instead
      expect(issued.status, issued.text).toBe(303);
      expect(issued.headers.location).toBe(`/sso/login?client_id=${client.client_id}`);
      expect(await usableTokens(user.id)).toBe(0);
    });
  });
});
