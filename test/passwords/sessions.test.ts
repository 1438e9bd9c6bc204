import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';
import { auditRows, deliveries, signIn, subscribe } from '../auth/support.ts';
import { eventually } from './smtp.ts';

const FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0';
const CHROME_MAC = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36';

describe("a user's sessions", () => {
  let app: TestApp;
  let webhookId: number;
  beforeAll(async () => {
    app = await startTestApp();
    webhookId = await subscribe(app, ['user.logout']);
  });
  const logouts = async (userId: number) => (await deliveries(app, webhookId, 'user.logout')).filter((d) => d.user_id === userId);
  afterAll(() => app?.close());

  it('lists the sessions with device, IP and last seen; revoke-all ends every other one and older access tokens', async () => {
    const user = await makeUser(app);
    const other = await makeUser(app);
    const here = await signIn(app, user.username, user.password, {});
    const laptop = await app.http.post('/api/auth/login', { login: user.username, password: user.password }, { headers: { 'user-agent': FIREFOX }, localAddress: '127.0.0.2' });
    const laptopCookie = String(laptop.headers['set-cookie']).split(';')[0];
    const otherUser = await signIn(app, other.username, other.password);
    const bearer = (await app.http.post('/api/login', { username: user.username, password: user.password })).body.token;

    const list = await app.http.get('/api/user/sessions', { headers: { cookie: here.cookie! } });
    expect(list.status).toBe(200);
    expect(list.body.length, 'only this user\'s sessions').toBe(2);
    const current = list.body.find((s: any) => s.current);
    const firefox = list.body.find((s: any) => !s.current);
    expect(firefox).toMatchObject({ ip_address: '127.0.0.2', device: 'Firefox on Linux', user_agent: FIREFOX });
    expect(Number.isNaN(Date.parse(firefox.last_seen_at))).toBe(false);
    expect(current.id).not.toContain(here.cookie!.split('=')[1]);

    const revoked = await app.http.post('/api/user/sessions/revoke-all', undefined, { headers: { cookie: here.cookie! } });
    expect(revoked.status).toBe(200);
    expect(revoked.body).toMatchObject({ success: true, ended_sessions: 1 });
    expect((await app.http.get('/api/user', { headers: { cookie: here.cookie! } })).status).toBe(200);
    expect((await app.http.get('/api/user', { headers: { cookie: laptopCookie } })).status).toBe(401);
    expect((await app.http.get('/api/user', { headers: { authorization: `Bearer ${bearer}` } })).status).toBe(401);
    expect((await app.http.get('/api/user', { headers: { cookie: otherUser.cookie! } })).status, 'another user is untouched').toBe(200);
    expect((await auditRows(app, user.username)).find((r) => r.action === 'user.logout')?.details).toMatchObject({ reason: 'revoke_all', ended_sessions: 1 });
  });

  it('a request still running on a session that a password change ended does not write it back when it ends', async () => {
    const user = await makeUser(app);
    const thief = formSession(app.app);
    const login = await thief.get('/login');
    expect((await thief.post('/login', { _csrf: hiddenField(login.text, '_csrf'), step: 'password', login: user.username, password: user.password })).status).toBe(303);
    const csrf = hiddenField((await thief.get('/account/sessions')).text, '_csrf');
    const sid = decodeURIComponent(thief.cookies.get('auth.sid')!).replace(/^s:/, '').replace(/\.[^.]*$/, '');
    const owner = await signIn(app, user.username, user.password);
    // a stale "last seen", so that the read of the session shows: the store moves it
    await app.db.query("UPDATE sessions SET last_seen_at = now() - interval '1 hour' WHERE sid = $1", [sid]);

    // a form post (it changes the session: a flash message) whose body is in flight while the owner changes the password;
    // its session is read before the body (forms are parsed by their routes)
    const base = await app.listen();
    const body = Buffer.from(new URLSearchParams({ _csrf: csrf, session: 'nope' }).toString());
    const answer = new Promise<number>((resolve, reject) => {
      const req = http.request(`${base}/account/sessions/end`, {
        method: 'POST',
        headers: { cookie: `auth.sid=${thief.cookies.get('auth.sid')}`, 'content-type': 'application/x-www-form-urlencoded', 'content-length': String(body.length), accept: 'text/html' },
      }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.write(body.subarray(0, 5));
      void eventually(async () => ((await app.db.query("SELECT 1 FROM sessions WHERE sid = $1 AND last_seen_at > now() - interval '1 minute'", [sid])).rowCount === 1 ? true : undefined), 'the session was read', 30_000)
        .then(async () => {
          const changed = await app.http.post('/api/user/password', { current_password: user.password, new_password: 'a brand new secret phrase' }, { headers: { cookie: owner.cookie! } });
          expect(changed.status, changed.text).toBe(200);
          req.end(body.subarray(5));
        }, reject);
    });
    expect(await answer, 'the form was answered (a redirect with its message)').toBe(303);
    expect((await app.db.query('SELECT 1 FROM sessions WHERE sid = $1', [sid])).rowCount, 'the ended session was not written back').toBe(0);
    expect((await thief.get('/account/sessions')).status, 'the cookie no longer signs in').toBe(303);
  });

  it('moves a session\'s last seen forward when it is used after a while', async () => {
    const user = await makeUser(app);
    const { cookie } = await signIn(app, user.username, user.password);
    await app.db.query("UPDATE sessions SET last_seen_at = now() - interval '1 hour' WHERE user_id = $1", [user.id]);
    expect((await app.http.get('/api/user', { headers: { cookie: cookie! } })).status).toBe(200);
    for (let i = 0; i < 200; i++) {
      const seen = (await app.db.query<{ fresh: boolean }>("SELECT last_seen_at > now() - interval '1 minute' AS fresh FROM sessions WHERE user_id = $1", [user.id])).rows[0];
      if (seen.fresh) return;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error('last_seen_at was not moved');
  });

  it('ending one session invalidates the SSO tokens it was given that no client has used, and no others', async () => {
    const user = await makeUser(app);
    const client = await makeClient(app);
    const ssoSignIn = async () => {
      const browser = formSession(app.app);
      const page = await browser.get(`/sso/login?client_id=${client.client_id}`);
      const answer = await browser.post('/sso/login', {
        _csrf: hiddenField(page.text, '_csrf'), step: 'password', client_id: client.client_id, login: user.username, password: user.password,
      }, { 'user-agent': FIREFOX });
      expect(answer.status, answer.text).toBe(303);
      return { browser, token: new URL(answer.headers.location!).searchParams.get('token')! };
    };
    const validate = (token: string) => app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token });
    const lost = await ssoSignIn();
    const kept = await ssoSignIn();
    const serverToServer = (await app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username: user.username })).body.token;

    const page = await kept.browser.get('/account/sessions');
    const lostRow = page.text.split('<tr data-session="').slice(1).find((chunk) => !chunk.startsWith(page.text.match(/<tr data-session="([^"]+)" data-current="true">/)![1]))!;
    const ended = await kept.browser.post('/account/sessions/end', { _csrf: hiddenField(page.text, '_csrf'), session: lostRow.slice(0, lostRow.indexOf('"')) });
    expect(ended.status).toBe(303);
    expect((await lost.browser.get('/account/sessions')).status, 'the ended session no longer signs in').toBe(303);

    expect((await validate(lost.token)).body, 'the ended session\'s token').toMatchObject({ valid: false, error: 'token_revoked' });
    expect((await validate(kept.token)).body, 'the token of the session that stays').toMatchObject({ valid: true });
    expect((await validate(serverToServer)).body, 'a token issued server to server').toMatchObject({ valid: true });
    expect((await auditRows(app, user.username)).find((r) => r.action === 'user.session_end')?.details).toMatchObject({ current: false, invalidated_tokens: 1 });
    expect(await logouts(user.id), 'user.logout is sent, as for every end of a session').toMatchObject([{ user_id: user.id, email: user.email, client_system: 'auth-service' }]);
  });

  it('the "Sign out" of this browser on /account/sessions is a sign-out as /sso/logout is: every unused token invalidated, user.logout sent', async () => {
    const user = await makeUser(app);
    const client = await makeClient(app);
    const tokenOf = async (browser: ReturnType<typeof formSession>) => {
      const page = await browser.get(`/sso/login?client_id=${client.client_id}`);
      const answer = page.status === 303 ? page : await browser.post('/sso/login', {
        _csrf: hiddenField(page.text, '_csrf'), step: 'password', client_id: client.client_id, login: user.username, password: user.password,
      });
      expect(answer.status, answer.text).toBe(303);
      return new URL(answer.headers.location!).searchParams.get('token')!;
    };
    const elsewhere = await tokenOf(formSession(app.app));
    const browser = formSession(app.app);
    const here = await tokenOf(browser);
    const page = await browser.get('/account/sessions');
    const own = page.text.match(/<tr data-session="([^"]+)" data-current="true">/)![1];
    const out = await browser.post('/account/sessions/end', { _csrf: hiddenField(page.text, '_csrf'), session: own });
    expect(out.headers.location).toBe('/login');
    for (const token of [here, elsewhere]) {
      const validated = await app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token });
      expect(validated.body).toMatchObject({ valid: false, error: 'token_revoked' });
    }
    expect(await logouts(user.id)).toHaveLength(1);
  });

  it('revoke-all needs a signed-in user', async () => {
    const r = await app.http.post('/api/user/sessions/revoke-all');
    expect(r.status).toBe(401);
  });

  it('the page lists the sessions and ends one, all others, or this one', async () => {
    const user = await makeUser(app);
    const elsewhere = await app.http.post('/api/auth/login', { login: user.username, password: user.password }, { headers: { 'user-agent': CHROME_MAC } });
    const elsewhereCookie = String(elsewhere.headers['set-cookie']).split(';')[0];
    const third = await signIn(app, user.username, user.password);

    const browser = formSession(await app.listen());
    const login = await browser.get('/login');
    await browser.post('/login', { _csrf: hiddenField(login.text, '_csrf'), step: 'password', login: user.username, password: user.password }, { 'user-agent': FIREFOX });
    const page = await browser.get('/account/sessions');
    expect(page.status).toBe(200);
    expect(page.text).toContain('Chrome on macOS');
    expect(page.text).toContain('Firefox on Linux');
    expect(page.text).toContain('This browser');
    const rows = [...page.text.matchAll(/<tr data-session="([^"]+)"( data-current="true")?>/g)];
    expect(rows.length).toBe(3);
    const csrf = hiddenField(page.text, '_csrf');

    // end the Chrome one: find its row
    const chromeRow = page.text.split('<tr data-session="').find((chunk) => chunk.includes('Chrome on macOS'))!;
    const chromeId = chromeRow.slice(0, chromeRow.indexOf('"'));
    const ended = await browser.post('/account/sessions/end', { _csrf: csrf, session: chromeId });
    expect(ended.status).toBe(303);
    expect((await app.http.get('/api/user', { headers: { cookie: elsewhereCookie } })).status).toBe(401);
    expect((await app.http.get('/api/user', { headers: { cookie: third.cookie! } })).status).toBe(200);

    const all = await browser.post('/account/sessions/end-all', { _csrf: csrf });
    expect(all.status).toBe(303);
    expect((await app.http.get('/api/user', { headers: { cookie: third.cookie! } })).status).toBe(401);
    const after = await browser.get('/account/sessions');
    expect(after.status, 'this browser stays signed in').toBe(200);
    expect([...after.text.matchAll(/<tr data-session="/g)].length).toBe(1);

    const own = after.text.match(/<tr data-session="([^"]+)" data-current="true">/)![1];
    const out = await browser.post('/account/sessions/end', { _csrf: csrf, session: own });
    expect(out.headers.location).toBe('/login');
    expect((await browser.get('/account/sessions')).status, 'signed out').toBe(303);
  });
});
