import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { admin } from '../helpers/cli.ts';
import { makeUser } from '../helpers/factories.ts';

/**
 * `npm run admin -- demo` run again on a database that has the demo user: it sets a new
 * password (and makes the user active). Every other path that does either audits it
 * (user.activate, user.password_set) and signs the user out everywhere (DESIGN "Passwords":
 * a change or reset ends the user's other sessions).
 */
describe('admin demo on an existing demo user', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());

  it('audits the reactivation of a deactivated demo user', async () => {
    await makeUser(app, { username: 'demo' });
    expect((await admin(app, ['user', 'set-active', 'demo', 'false'])).code).toBe(0);
    const r = await admin(app, ['demo', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const user = await app.db.query<{ active: boolean }>("SELECT active FROM users WHERE username = 'demo'");
    expect(user.rows[0].active).toBe(true);
    const audit = await app.db.query<{ action: string }>("SELECT action FROM audit_log WHERE username = 'demo' ORDER BY id");
    expect(audit.rows.map((a) => a.action)).toContain('user.activate');
  });

  it('signs the demo user out everywhere when it gives them a new password', async () => {
    const first = await admin(app, ['demo', '--json']);
    expect(first.code, first.stderr).toBe(0);
    const { password } = JSON.parse(first.stdout) as { password: string };
    const login = await app.http.post('/api/login', { username: 'demo', password });
    expect(login.status, login.text).toBe(200);
    const bearer = { headers: { authorization: `Bearer ${login.body.token as string}` } };
    expect((await app.http.get('/api/user', bearer)).status).toBe(200);

    const again = await admin(app, ['demo', '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout).password).not.toBe(password);
    const after = await app.http.get('/api/user', bearer);
    expect(after.status, 'an access token from before the password was replaced').toBe(401);
  });
});
