import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';
import { signIn } from '../auth/support.ts';

const NEW_PASSWORD = 'my own new passphrase 4711';

describe('an administrator sets their own password in the panel', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());

  async function signInPage(user: { username: string; password: string }) {
    const s = formSession(app.app);
    const page = await s.get('/login');
    const res = await s.post('/login', { _csrf: hiddenField(page.text, '_csrf'), step: 'password', login: user.username, password: user.password });
    expect(res.status).toBe(303);
    return s;
  }

  it('stays signed in under a new session id, sees the message, and ends only their other sessions', async () => {
    const admin = await makeUser(app, { role: 'admin' });
    const s = await signInPage(admin);
    const other = (await signIn(app, admin.username, admin.password)).cookie!;
    const page = await s.get(`/admin/users/${admin.id}`);
    expect(page.text, 'no must-change box on one\'s own page').not.toContain('name="must_change"');
    const before = s.cookies.get('auth.sid');

    const set = await s.post(`/admin/users/${admin.id}/password`, { _csrf: hiddenField(page.text, '_csrf'), password: NEW_PASSWORD });
    expect(set.status).toBe(303);
    expect(set.headers.location).toBe(`/admin/users/${admin.id}`);
    expect(s.cookies.get('auth.sid'), 'a new session id, as at sign-in').not.toBe(before);
    const after = await s.get(set.headers.location!);
    expect(after.status, 'still signed in').toBe(200);
    expect(after.text).toMatch(/Your password was set/);

    expect((await app.http.get('/api/user', { headers: { cookie: other } })).status, 'the other session ended').toBe(401);
    expect((await app.http.get('/api/user', { headers: { cookie: `auth.sid=${before}` } })).status, 'the old session id is worthless').toBe(401);
    const row = await app.db.query<{ must_change_password: boolean }>('SELECT must_change_password FROM users WHERE id = $1', [admin.id]);
    expect(row.rows[0].must_change_password).toBe(false);
    expect((await signIn(app, admin.username, NEW_PASSWORD)).res.status, 'the new password signs in at once').toBe(200);
  });

  it('refuses to make the next sign-in of one\'s own change the password, pointing to /account/password', async () => {
    const admin = await makeUser(app, { role: 'admin' });
    const s = await signInPage(admin);
    const page = await s.get(`/admin/users/${admin.id}`);
    const refused = await s.post(`/admin/users/${admin.id}/password`, { _csrf: hiddenField(page.text, '_csrf'), password: NEW_PASSWORD, must_change: 'on' });
    expect(refused.status).toBe(303);
    const back = await s.get(refused.headers.location!);
    expect(back.status).toBe(200);
    expect(back.text).toContain('/account/password');
    expect(back.text).toMatch(/cannot require yourself/);
    expect((await signIn(app, admin.username, admin.password)).res.status, 'nothing changed').toBe(200);
  });
});
