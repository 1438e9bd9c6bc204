import { mkdtemp, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { formSession } from '../pages/form-session.ts';
import { signIn } from './support.ts';

describe('session cookie and secret', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  it('marks the cookie Secure in production (TLS ends at the trusted proxy)', async () => {
    const prod = await startTestApp({ NODE_ENV: 'production', BCRYPT_COST: '10', TRUST_PROXY: 'loopback' }, { db: app.db });
    try {
      const user = await makeUser(prod);
      const res = await prod.http.post('/api/auth/login', { login: user.username, password: user.password }, { headers: { 'x-forwarded-proto': 'https' } });
      expect(res.status, res.text).toBe(200);
      const cookie = ([] as string[]).concat(res.headers['set-cookie'] ?? []).find((c) => c.startsWith('auth.sid='))!;
      expect(cookie).toMatch(/; Secure/i);
      expect(cookie).toMatch(/; HttpOnly/i);
    } finally {
      await prod.stop();
    }
  });

  it('without SESSION_SECRET outside production, generates one in DATA_DIR that instances share', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-session-'));
    const env = { SESSION_SECRET: '', DATA_DIR: dataDir };
    const first = await startTestApp(env, { db: app.db });
    const second = await startTestApp(env, { db: app.db });
    try {
      const user = await makeUser(first);
      const { cookie } = await signIn(first, user.username, user.password);
      const file = await stat(path.join(dataDir, 'session.key'));
      expect(file.mode & 0o077, 'readable by the owner only').toBe(0);
      const there = await second.http.get('/api/user', { headers: { cookie: cookie! } });
      expect(there.status, 'the second instance reads the same secret').toBe(200);
      const elsewhere = await app.http.get('/api/user', { headers: { cookie: cookie! } });
      expect(elsewhere.status, 'an instance with another secret refuses the cookie').toBe(401);
    } finally {
      await second.stop();
      await first.stop();
    }
  });

  it('keeps the session row until its cookie expires, and deletes it at sign-out', async () => {
    const user = await makeUser(app);
    const { cookie } = await signIn(app, user.username, user.password);
    const sid = decodeURIComponent(cookie!.split('=')[1]).slice(2).split('.')[0];
    const row = await app.db.query<{ expire: Date; sess: unknown }>('SELECT expire, sess FROM sessions WHERE sid = $1', [sid]);
    expect(row.rowCount).toBe(1);
    const ttl = new Date(row.rows[0].expire).getTime() - Date.now();
    expect(Math.abs(ttl - app.config.SESSION_TTL_SECONDS * 1000) < 60_000, 'expires with the cookie').toBeTruthy();
    const sess = typeof row.rows[0].sess === 'string' ? JSON.parse(row.rows[0].sess) : row.rows[0].sess;
    expect(sess.userId).toBe(user.id);
    expect(sess.twoFactorUsed).toBe(false);
    await app.http.post('/api/auth/logout', undefined, { headers: { cookie: cookie! } });
    expect((await app.db.query('SELECT 1 FROM sessions WHERE sid = $1', [sid])).rowCount).toBe(0);
  });

  it('stores no session for a page\'s form token, and gives the sign-in its full life', async () => {
    const user = await makeUser(app);
    const browser = formSession(app.app);
    const page = await browser.get('/login');
    expect(page.status).toBe(200);
    expect(browser.cookies.has('auth.sid'), 'no session for an anonymous visit (src/pages/csrf.ts)').toBe(false);
    const sidOf = () => decodeURIComponent(browser.cookies.get('auth.sid')!).slice(2).split('.')[0];
    const expiresIn = async (sid: string) => {
      const row = await app.db.query<{ expire: Date }>('SELECT expire FROM sessions WHERE sid = $1', [sid]);
      expect(row.rowCount, 'the row exists').toBe(1);
      return new Date(row.rows[0].expire).getTime() - Date.now();
    };
    const csrf = /name="_csrf" value="([^"]+)"/.exec(page.text)![1];
    const signedIn = await browser.post('/login', { _csrf: csrf, step: 'password', login: user.username, password: user.password });
    expect(signedIn.status, signedIn.text).toBe(303);
    const ttl = await expiresIn(sidOf());
    expect(Math.abs(ttl - app.config.SESSION_TTL_SECONDS * 1000) < 60_000, 'the signed-in session lives SESSION_TTL_SECONDS').toBeTruthy();
  });
});
