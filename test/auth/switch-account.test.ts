import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';

/** A sign-in in a browser already signed in as someone else replaces that user's session there. */
describe('signing in as another user in a signed-in browser', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  const logouts = async (userId: number) => (await app.db.query<{ details: any }>(
    "SELECT details FROM audit_log WHERE action = 'user.logout' AND user_id = $1", [userId])).rows.map((r) => (typeof r.details === 'string' ? JSON.parse(r.details) : r.details));

  it('on the page: the first user is signed out there, their unused tokens from it invalidated', async () => {
    const client = await makeClient(app);
    const first = await makeUser(app);
    const second = await makeUser(app);
    const s = formSession(app.app);
    const signIn = async (u: { username: string; password: string }) => {
      // signed in, /login sends the browser to the dashboard; its form's token is the session's
      const shown = await s.get('/login');
      const page = shown.status === 200 ? shown : await s.get('/dashboard');
      const r = await s.post('/login', { _csrf: hiddenField(page.text, '_csrf'), step: 'password', login: u.username, password: u.password });
      expect(r.status, r.text).toBe(303);
    };
    await signIn(first);
    const toClient = await s.get(`/sso/login?client_id=${client.client_id}`);
    const token = new URL(toClient.headers.location!).searchParams.get('token')!;
    await signIn(second);
    expect(await logouts(first.id)).toMatchObject([{ via: 'page', invalidated_tokens: 1, session_ended: true }]);
    const late = await app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token });
    expect([late.status, late.body.error], 'the first user\'s token from that browser').toStrictEqual([401, 'token_revoked']);
    expect(await logouts(second.id), 'the user signing in is not signed out').toStrictEqual([]);
    await signIn(second);
    expect(await logouts(second.id), 'nor is the same user signing in again').toStrictEqual([]);
  });

  it('on the page, by a user who must change their password first (a restricted session replaces the first user\'s)', async () => {
    const client = await makeClient(app);
    const first = await makeUser(app);
    const second = await makeUser(app);
    await app.services.users.setPassword({ id: second.id }, { mustChange: true }, { via: 'cli' });
    const s = formSession(app.app);
    const p1 = await s.get('/login');
    await s.post('/login', { _csrf: hiddenField(p1.text, '_csrf'), step: 'password', login: first.username, password: first.password });
    const token = new URL((await s.get(`/sso/login?client_id=${client.client_id}`)).headers.location!).searchParams.get('token')!;
    const p2 = await s.get('/dashboard');
    const r = await s.post('/login', { _csrf: hiddenField(p2.text, '_csrf'), step: 'password', login: second.username, password: second.password });
    expect(r.headers.location).toBe('/account/password');
    expect(await logouts(first.id)).toMatchObject([{ via: 'page', invalidated_tokens: 1 }]);
    const late = await app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token });
    expect(late.body.error).toBe('token_revoked');
  });

  it('on the API: the same', async () => {
    const first = await makeUser(app);
    const second = await makeUser(app);
    const one = await app.http.post('/api/auth/login', { login: first.username, password: first.password });
    const cookie = String(one.headers['set-cookie']).split(';')[0];
    const two = await app.http.post('/api/auth/login', { login: second.username, password: second.password }, { headers: { cookie } });
    expect(two.status).toBe(200);
    expect(await logouts(first.id)).toMatchObject([{ via: 'api', session_ended: true }]);
  });
});
