import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';
import { signIn } from '../auth/support.ts';
import { withWritesRefused } from '../helpers/refused-writes.ts';

const NEW_PASSWORD = 'a password set while the session was lost 31';

/*
 * A password change commits, then the session it renews is saved. When that save fails (the
 * database went away between the two; here it refuses the user's session rows), the password
 * is changed all the same: the answer says so and asks for a new sign-in, where it was an error
 * (500 or 503) for a change that had happened.
 */
describe('a password change whose renewed session cannot be saved', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());

  /** Runs `attempt` while the database refuses new session rows of user `userId`. */
  const withSessionsRefused = <T>(userId: number, attempt: () => Promise<T>): Promise<T> =>
    withWritesRefused(app.db, { table: 'sessions', ops: 'INSERT', when: `r.sess->>'userId' = '${userId}'` }, attempt);

  /**
   * Runs `attempt` while the database refuses every write of user `userId`'s session rows but
   * those of the transaction that changes the user's row (the password change itself): the
   * database gone just after the change committed, for the renewal's delete as for its save.
   */
  const withSessionWritesLost = <T>(userId: number, attempt: () => Promise<T>): Promise<T> =>
    withWritesRefused(app.db, {
      table: 'sessions', ops: 'INSERT OR DELETE',
      when: `r.sess->>'userId' = '${userId}' AND (SELECT xmin::text FROM users WHERE id = ${userId}) <> pg_current_xact_id()::xid::text`,
    }, attempt);

  /** The new password signs in, the old one no longer does. */
  async function expectChanged(user: { username: string; password: string }) {
    expect((await signIn(app, user.username, NEW_PASSWORD)).res.status, 'the new password signs in').toBe(200);
    expect((await signIn(app, user.username, user.password)).res.status, 'the old one does not').toBe(401);
  }

  it('through the API answers 200 with session_ended, and clears the session cookie', async () => {
    const user = await makeUser(app);
    const { cookie } = await signIn(app, user.username, user.password);
    const r = await withSessionsRefused(user.id, () =>
      app.http.post('/api/user/password', { current_password: user.password, new_password: NEW_PASSWORD }, { headers: { cookie: cookie! } }));
    expect([r.status, r.body], r.text).toStrictEqual([200, { success: true, session_ended: true }]);
    const cookies = ([] as string[]).concat(r.headers['set-cookie'] ?? []).filter((c) => c.startsWith('auth.sid='));
    expect(cookies, 'the cookie is cleared, and no other session is set after that (a review helper)').toHaveLength(1);
    expect(cookies[0]).toMatch(/^auth\.sid=;/);
    expect((await app.http.get('/api/user', { headers: { cookie: cookie! } })).status, 'signed out').toBe(401);
    await expectChanged(user);
  });

  it('on the account page says the password was changed and links to the sign-in', async () => {
    const user = await makeUser(app);
    const browser = formSession(await app.listen());
    const login = await browser.get('/login');
    expect((await browser.post('/login', { _csrf: hiddenField(login.text, '_csrf'), step: 'password', login: user.username, password: user.password })).status).toBe(303);
    const form = await browser.get('/account/password');
    const done = await withSessionsRefused(user.id, () => browser.post('/account/password', {
      _csrf: hiddenField(form.text, '_csrf'), current_password: user.password, new_password: NEW_PASSWORD, confirm_password: NEW_PASSWORD,
    }));
    expect(done.status, done.text.slice(0, 300)).toBe(200);
    expect(done.text).toContain('Your password was changed');
    expect(done.text).toContain('Sign in again with your new password');
    expect(done.text).toContain('href="/login"');
    expect((await browser.get('/account/password')).status, 'signed out: to the sign-in page').toBe(303);
    await expectChanged(user);
  });

  it('in the admin panel, an administrator\'s own new password is set and they are asked to sign in again', async () => {
    const admin = await makeUser(app, { role: 'admin' });
    const browser = formSession(app.app);
    const login = await browser.get('/login');
    expect((await browser.post('/login', { _csrf: hiddenField(login.text, '_csrf'), step: 'password', login: admin.username, password: admin.password })).status).toBe(303);
    const page = await browser.get(`/admin/users/${admin.id}`);
    const set = await withSessionsRefused(admin.id, () => browser.post(`/admin/users/${admin.id}/password`, { _csrf: hiddenField(page.text, '_csrf'), password: NEW_PASSWORD }));
    expect(set.status, set.text.slice(0, 300)).toBe(200);
    expect(set.text).toContain('Your password was set');
    expect(set.text).toContain(`href="/login?next=${encodeURIComponent(`/admin/users/${admin.id}`)}"`);
    await expectChanged(admin);
  });

  it('leaves the session used for the change signed out when the renewal cannot even delete it (a review helper)', async () => {
    const user = await makeUser(app);
    const { cookie } = await signIn(app, user.username, user.password);
    const r = await withSessionWritesLost(user.id, () =>
      app.http.post('/api/user/password', { current_password: user.password, new_password: NEW_PASSWORD }, { headers: { cookie: cookie! } }));
    expect([r.status, r.body], r.text).toStrictEqual([200, { success: true, session_ended: true }]);
    expect((await app.http.get('/api/user', { headers: { cookie: cookie! } })).status, 'the session from before the change').toBe(401);
    await expectChanged(user);
  });
});
