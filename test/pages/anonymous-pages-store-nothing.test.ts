import supertest from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from './form-session.ts';

describe('anonymous visits of the sign-in pages store no session', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  const sessionRows = async () => (await app.db.query<{ n: number }>('SELECT count(*)::int AS n FROM sessions')).rows[0]!.n;

  it('50 anonymous GETs of /sso/login, /login and /forgot-password add no session row and set no session cookie', async () => {
    const client = await makeClient(app);
    const before = await sessionRows();
    const paths = [`/sso/login?client_id=${client.client_id}`, '/login', '/forgot-password'];
    for (let i = 0; i < 50; i++) {
      const path = paths[i % paths.length]!;
      const page = await app.http.get(path, { headers: { accept: 'text/html' } });
      expect(page.status, path).toBe(200);
      expect(page.text, 'the form still has its token').toMatch(/name="_csrf" value="[A-Za-z0-9_-]{20,}"/);
      const cookies = ([] as string[]).concat(page.headers['set-cookie'] ?? []);
      expect(cookies.some((c) => c.startsWith('auth.sid=')), `${path}: no session cookie`).toBe(false);
      expect(cookies.filter((c) => c.startsWith('auth.csrf=')).every((c) => /HttpOnly/i.test(c) && /SameSite=Lax/i.test(c)), 'the token cookie').toBe(true);
    }
    expect(await sessionRows() - before).toBe(0);
  });

  it('a fresh browser signs in with the form it was given, and a form posted without the cookie or with another browser\'s token is refused', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    // supertest's agent: a cookie jar, as a browser keeps one
    const agent = supertest.agent(app.app);
    const page = await agent.get('/login').set('accept', 'text/html');
    expect(page.status).toBe(200);
    const token = hiddenField(page.text, '_csrf');
    const signedIn = await agent.post('/login').type('form').send({ _csrf: token, step: 'password', login: user.username, password: user.password }).redirects(0);
    expect(signedIn.status, signedIn.text).toBe(303);
    expect((await agent.get('/dashboard').redirects(0)).status, 'signed in').toBe(200);
    expect(await sessionRows()).toBeGreaterThanOrEqual(1);

    // the same token without the browser's cookie, and another browser's cookie with it
    const withoutCookie = await supertest(app.app).post('/login').type('form').send({ _csrf: token, step: 'password', login: user.username, password: user.password }).redirects(0);
    expect(withoutCookie.status).toBe(403);
    const other = formSession(app.app);
    await other.get(`/sso/login?client_id=${client.client_id}`);
    const crossed = await other.post('/login', { _csrf: token, step: 'password', login: user.username, password: user.password });
    expect(crossed.status).toBe(403);
    const forged = await other.post('/login', { _csrf: other.cookies.get('auth.csrf')!, step: 'password', login: user.username, password: user.password });
    expect(forged.status, 'the cookie\'s nonce itself is no token').toBe(403);
  });

  it('a form rendered before the browser had a session is accepted once it has one', async () => {
    const user = await makeUser(app);
    const s = formSession(app.app);
    const anonymous = hiddenField((await s.get('/forgot-password')).text, '_csrf');
    const signIn = await s.post('/login', { _csrf: hiddenField((await s.get('/login')).text, '_csrf'), step: 'password', login: user.username, password: user.password });
    expect(signIn.status).toBe(303);
    expect(s.cookies.has('auth.sid')).toBe(true);
    const posted = await s.post('/forgot-password', { _csrf: anonymous, login: user.username });
    expect(posted.status, posted.text).not.toBe(403);
  });
});
