import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { admin } from '../helpers/cli.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';
import { auditOf, signedIn, type SignedIn } from '../admin/support.ts';
import { signIn } from '../auth/support.ts';

const TEMPORARY = 'temporary but long 2931';
const CHOSEN = 'four unrelated words here';

describe('administrators set passwords; must-change forces a change at the next sign-in', () => {
  let app: TestApp;
  let boss: SignedIn;
  beforeAll(async () => {
    app = await startTestApp();
    boss = await signedIn(app, 'admin');
  });
  afterAll(() => app?.close());

  async function pageSignIn(base: string, login: string, password: string, path = '/login', hidden: Record<string, string> = {}) {
    const browser = formSession(base);
    const page = await browser.get(path);
    const res = await browser.post(path.split('?')[0], { _csrf: hiddenField(page.text, '_csrf'), step: 'password', login, password, ...hidden });
    return { browser, res };
  }

  it('user set-password --must-change: API sign-ins answer 403 password_change_required, the credentials change it', async () => {
    const user = await makeUser(app);
    const { cookie } = await signIn(app, user.username, user.password);
    const cli = await admin(app, ['user', 'set-password', user.username, '--password', TEMPORARY, '--must-change', '--json']);
    expect(cli.code, cli.stderr).toBe(0);
    expect(JSON.parse(cli.stdout)).toStrictEqual({ username: user.username, must_change_password: true });
    expect((await app.http.get('/api/user', { headers: { cookie: cookie! } })).status, 'signed out everywhere').toBe(401);
    expect((await signIn(app, user.username, user.password)).res.status, 'the old password is gone').toBe(401);

    const session = await signIn(app, user.username, TEMPORARY);
    expect(session.res.status).toBe(403);
    expect(session.res.body.error).toBe('password_change_required');
    expect(session.res.body.change_password.path).toBe('/api/user/password');
    expect(session.cookie, 'no session').toBe(undefined);
    const token = await app.http.post('/api/login', { username: user.username, password: TEMPORARY });
    expect(token.status).toBe(403);
    expect(token.body.token).toBe(undefined);

    const weak = await app.http.post('/api/user/password', { login: user.username, current_password: TEMPORARY, new_password: 'short' });
    expect(weak.status).toBe(400);
    const changed = await app.http.post('/api/user/password', { login: user.username, current_password: TEMPORARY, new_password: CHOSEN });
    expect(changed.status).toBe(200);
    expect((await signIn(app, user.username, CHOSEN)).res.status).toBe(200);
    const row = (await auditOf(app, 'user.password_set')).find((r) => r.user_id === user.id)!;
    expect(row.details).toMatchObject({ via: 'cli', must_change: true, password_changed: true });
    expect(JSON.stringify(row)).not.toContain(TEMPORARY);
  });

  it('user set-password without --must-change sets a password that works at once, and clears a lockout', async () => {
    const user = await makeUser(app);
    for (let i = 0; i < app.config.LOCKOUT_THRESHOLD; i++) await signIn(app, user.username, 'not the password');
    expect((await signIn(app, user.username, user.password)).res.status).toBe(423);
    const cli = await admin(app, ['user', 'set-password', user.username, '--password', TEMPORARY]);
    expect(cli.code, cli.stderr).toBe(0);
    expect((await signIn(app, user.username, TEMPORARY)).res.status).toBe(200);
  });

  it('user set-password refuses weak passwords and unknown users', async () => {
    const user = await makeUser(app);
    for (const weak of ['short', 'qwertyuiop', user.username]) {
      const r = await admin(app, ['user', 'set-password', user.username, '--password', weak]);
      expect(r.code, weak).toBe(1);
      expect(r.stderr.length > 10).toBe(true);
    }
    expect((await admin(app, ['user', 'set-password', unique('nobody'), '--password', TEMPORARY])).code).toBe(1);
    expect((await admin(app, ['user', 'set-password', user.username])).code, '--password is required').toBe(2);
    expect((await signIn(app, user.username, user.password)).res.status, 'unchanged').toBe(200);
  });

  it('a must-change sign-in on the page leads to the change form, then on to where it was going', async () => {
    const user = await makeUser(app);
    await admin(app, ['user', 'set-password', user.username, '--password', TEMPORARY, '--must-change']);
    const base = await app.listen();
    const { browser, res } = await pageSignIn(base, user.username, TEMPORARY);
    expect(res.status).toBe(303);
    expect(res.headers.location).toBe('/account/password');
    expect((await browser.get('/dashboard')).status, 'not signed in yet').toBe(303);
    const form = await browser.get('/account/password');
    expect(form.status).toBe(200);
    expect(form.text).toContain('An administrator asked you to choose a new password');
    expect(String(form.headers['content-security-policy']), 'its form leads only here').toMatch(/form-action 'self'(;|$)/);
    const csrf = hiddenField(form.text, '_csrf');
    const same = await browser.post('/account/password', { _csrf: csrf, current_password: TEMPORARY, new_password: TEMPORARY, confirm_password: TEMPORARY });
    expect(same.status).toBe(400);
    const done = await browser.post('/account/password', { _csrf: csrf, current_password: TEMPORARY, new_password: CHOSEN, confirm_password: CHOSEN });
    expect(done.status).toBe(303);
    expect(done.headers.location).toBe('/login');
    const onward = await browser.get('/login');
    expect(onward.status).toBe(303);
    expect(onward.headers.location).toBe('/dashboard');
    const dashboard = await browser.get('/dashboard');
    expect(dashboard.status).toBe(200);
    expect(dashboard.text).toContain('Your password was changed. You are signed in.');
  });

  it('a must-change sign-in for a client system continues to that system after the change', async () => {
    const user = await makeUser(app);
    const client = await makeClient(app, { callbackUrl: 'https://client.example/cb' });
    await admin(app, ['user', 'set-password', user.username, '--password', TEMPORARY, '--must-change']);
    const { browser, res } = await pageSignIn(await app.listen(), user.username, TEMPORARY, `/sso/login?client_id=${client.client_id}&state=s1`, { client_id: client.client_id, state: 's1' });
    expect(res.headers.location).toBe('/account/password');
    const form = await browser.get('/account/password');
    // a browser applies form-action to the redirects after the post too, on to the callback and wherever it sends the browser
    expect(String(form.headers['content-security-policy'])).not.toMatch(/form-action/);
    expect(String(form.headers['content-security-policy'])).toMatch(/script-src 'self'/);
    const mismatch = await browser.post('/account/password', { _csrf: hiddenField(form.text, '_csrf'), current_password: TEMPORARY, new_password: CHOSEN, confirm_password: 'something else' });
    expect(mismatch.status).toBe(400);
    expect(String(mismatch.headers['content-security-policy']), 'the form shown again too').not.toMatch(/form-action/);
    const done = await browser.post('/account/password', { _csrf: hiddenField(form.text, '_csrf'), current_password: TEMPORARY, new_password: CHOSEN, confirm_password: CHOSEN });
    expect(done.headers.location).toBe(`/sso/login?client_id=${client.client_id}&state=s1`);
    const onward = await browser.get(done.headers.location!);
    expect(onward.headers.location).toMatch(/^https:\/\/client\.example\/cb\?token=.+&state=s1$/);
    const later = await browser.get('/dashboard');
    expect(later.status).toBe(200);
    expect(later.text, 'no message left waiting for a later page').not.toContain('Your password was changed');
  });

  it('PATCH /api/admin/users/:id sets password and must_change_password; the password never reaches the audit log', async () => {
    const user = await makeUser(app);
    const r = await app.http.patch(`/api/admin/users/${user.id}`, { password: TEMPORARY, must_change_password: true }, boss.as);
    expect(r.status, r.text).toBe(200);
    expect(r.body.must_change_password).toBe(true);
    expect((await signIn(app, user.username, TEMPORARY)).res.body.error).toBe('password_change_required');

    const cleared = await app.http.patch(`/api/admin/users/${user.id}`, { must_change_password: false }, boss.as);
    expect(cleared.body.must_change_password).toBe(false);
    expect((await signIn(app, user.username, TEMPORARY)).res.status).toBe(200);

    const weak = await app.http.patch(`/api/admin/users/${user.id}`, { password: user.email }, boss.as);
    expect(weak.status).toBe(400);
    expect(weak.body.error).toBe('invalid_password');
    const rows = await app.db.query('SELECT details FROM audit_log WHERE user_id = $1', [user.id]);
    expect(JSON.stringify(rows.rows)).not.toContain(TEMPORARY);
  });

  it('the panel sets a password with the must-change box', async () => {
    const user = await makeUser(app);
    const { browser } = await pageSignIn(await app.listen(), boss.user.username, boss.user.password);
    const page = await browser.get(`/admin/users/${user.id}`);
    expect(page.text).toContain(`action="/admin/users/${user.id}/password"`);
    const csrf = hiddenField(page.text, '_csrf');
    const weak = await browser.post(`/admin/users/${user.id}/password`, { _csrf: csrf, password: 'password1234', must_change: 'on' });
    expect(weak.status).toBe(303);
    expect((await browser.get(`/admin/users/${user.id}`)).text).toContain('most commonly used');
    const set = await browser.post(`/admin/users/${user.id}/password`, { _csrf: csrf, password: TEMPORARY, must_change: 'on' });
    expect(set.status).toBe(303);
    expect((await browser.get(`/admin/users/${user.id}`)).text).toContain('data-field="must-change"');
    expect((await signIn(app, user.username, TEMPORARY)).res.body.error).toBe('password_change_required');
  });

  it('refuses weak passwords when creating users through the API, the command line and the panel', async () => {
    const name = unique('new');
    const api = await app.http.post('/api/admin/users', { username: name, email: `${name}@example.com`, password: 'letmein123' }, boss.as);
    expect(api.status).toBe(400);
    expect(api.body.error).toBe('invalid_password');
    const sameAsName = await app.http.post('/api/admin/users', { username: 'longusername1', email: 'x@example.com', password: 'LongUserName1' }, boss.as);
    expect(sameAsName.body.message).toMatch(/username/);
    const cli = await admin(app, ['user', 'create', '--username', name, '--email', `${name}@example.com`, '--password', 'too short']);
    expect(cli.code).toBe(1);
    expect(cli.stderr).toMatch(/at least 10 characters/);
    const { browser } = await pageSignIn(await app.listen(), boss.user.username, boss.user.password);
    const form = await browser.get('/admin/users/new');
    const panel = await browser.post('/admin/users', { _csrf: hiddenField(form.text, '_csrf'), username: name, email: `${name}@example.com`, role: 'user', password: 'qwertyuiop' });
    expect(panel.status).toBe(400);
    expect(panel.text).toContain('most commonly used');
    expect((await app.db.query('SELECT 1 FROM users WHERE username = $1', [name])).rowCount).toBe(0);
  });
});
