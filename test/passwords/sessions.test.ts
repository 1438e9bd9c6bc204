import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';
import { auditRows, signIn } from '../auth/support.ts';

const FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0';
const CHROME_MAC = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36';

describe("a user's sessions", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
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
