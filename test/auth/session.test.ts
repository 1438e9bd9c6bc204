import assert from 'node:assert/strict';
import { mkdtemp, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { signIn } from './support.ts';

describe('session cookie and secret', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(() => app.close());

  it('marks the cookie Secure in production (TLS ends at the trusted proxy)', async () => {
    const prod = await startTestApp({ NODE_ENV: 'production', TRUST_PROXY: 'loopback' }, { db: app.db });
    try {
      const user = await makeUser(prod);
      const res = await prod.http.post('/api/auth/login', { login: user.username, password: user.password }, { headers: { 'x-forwarded-proto': 'https' } });
      assert.equal(res.status, 200, res.text);
      const cookie = ([] as string[]).concat(res.headers['set-cookie'] ?? []).find((c) => c.startsWith('auth.sid='))!;
      assert.match(cookie, /; Secure/i);
      assert.match(cookie, /; HttpOnly/i);
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
      assert.equal(file.mode & 0o077, 0, 'readable by the owner only');
      const there = await second.http.get('/api/user', { headers: { cookie: cookie! } });
      assert.equal(there.status, 200, 'the second instance reads the same secret');
      const elsewhere = await app.http.get('/api/user', { headers: { cookie: cookie! } });
      assert.equal(elsewhere.status, 401, 'an instance with another secret refuses the cookie');
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
    assert.equal(row.rowCount, 1);
    const ttl = new Date(row.rows[0].expire).getTime() - Date.now();
    assert.ok(Math.abs(ttl - app.config.SESSION_TTL_SECONDS * 1000) < 60_000, 'expires with the cookie');
    const sess = typeof row.rows[0].sess === 'string' ? JSON.parse(row.rows[0].sess) : row.rows[0].sess;
    assert.equal(sess.userId, user.id);
    assert.equal(sess.twoFactorUsed, false);
    await app.http.post('/api/auth/logout', undefined, { headers: { cookie: cookie! } });
    assert.equal((await app.db.query('SELECT 1 FROM sessions WHERE sid = $1', [sid])).rowCount, 0);
  });
});
