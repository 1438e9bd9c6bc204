import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { admin } from '../helpers/cli.ts';
import { makeUser } from '../helpers/factories.ts';
import { removeServiceAddress, saveServiceAddress } from '../../src/demo/address.ts';

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

  it('points the demo at the running service, not at the shell\'s PORT: PUBLIC_URL, the recorded address, the demo\'s own, then PORT', async () => {
    const callback = async () => (await app.db.query<{ callback_url: string }>("SELECT callback_url FROM clients WHERE client_id = 'demo'")).rows[0].callback_url;
    // a shell without the service's PORT (the config's default, 3000): the demo client keeps its address
    expect((await admin(app, ['demo', '--base-url', 'http://127.0.0.1:4321'])).code).toBe(0);
    const kept = await admin(app, ['demo'], { PORT: '3000' });
    expect(kept.code, kept.stderr).toBe(0);
    expect(await callback()).toBe('http://127.0.0.1:4321/demo/callback');
    expect(kept.stderr).toMatch(/the demo points at http:\/\/127\.0\.0\.1:4321 \(from the demo client's callback/);

    // a service running on this DATA_DIR says where it listens
    await saveServiceAddress(app.config.DATA_DIR, 'http://127.0.0.1:5678');
    try {
      expect((await admin(app, ['demo'], { PORT: '3000' })).code).toBe(0);
      expect(await callback()).toBe('http://127.0.0.1:5678/demo/callback');
      // PUBLIC_URL says it for every instance
      expect((await admin(app, ['demo'], { PORT: '3000', PUBLIC_URL: 'https://auth.example.com' })).code).toBe(0);
      expect(await callback()).toBe('https://auth.example.com/demo/callback');
    } finally {
      await removeServiceAddress(app.config.DATA_DIR);
    }
    // once the service is gone the demo keeps its address; only a demo with none takes PORT
    expect((await admin(app, ['demo'], { PORT: '3000' })).code).toBe(0);
    expect(await callback()).toBe('https://auth.example.com/demo/callback');
  });
});
