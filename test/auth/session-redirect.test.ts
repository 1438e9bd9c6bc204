import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';

/**
 * A redirect must not leave before the session it changed is saved: browsers follow a 303 as
 * soon as its headers arrive, and the next page would miss a flash message. Made deterministic by holding a lock on the sessions table (PostgreSQL).
 */
describe.skipIf(!onPostgres && 'needs a second connection to hold a lock (PostgreSQL)')('redirects after a session change', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  it('sends the 303 only once the session holding the flash message is saved', async () => {
    const admin = await makeUser(app, { role: 'admin' });
    const client = await makeClient(app);
    const s = formSession(app.app);
    const login = await s.get('/login');
    expect((await s.post('/login', { _csrf: hiddenField(login.text, '_csrf'), step: 'password', login: admin.username, password: admin.password })).status).toBe(303);
    const csrf = hiddenField((await s.get(`/admin/clients/${client.client_id}`)).text, '_csrf');
    const cookie = [...s.cookies].map(([k, v]) => `${k}=${v}`).join('; ');

    const locker = new pg.Client({ connectionString: app.databaseUrl });
    await locker.connect();
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE sessions IN EXCLUSIVE MODE'); // session writes wait; reads go on
    let headersAt = 0;
    const base = await app.listen();
    const answer = new Promise<http.IncomingMessage>((resolve, reject) => {
      const body = new URLSearchParams({ _csrf: csrf, client_name: 'Race', callback_url: 'https://race.example/cb', allowed_ips: '127.0.0.1' }).toString();
      const req = http.request(`${base}/admin/clients/${client.client_id}`, {
        method: 'POST',
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', 'content-length': String(Buffer.byteLength(body)), accept: 'text/html' },
      }, (res) => {
        headersAt = Date.now();
        resolve(res);
      });
      req.on('error', reject);
      req.end(body);
    });
    await new Promise((r) => setTimeout(r, 400));
    const early = headersAt;
    const releasedAt = Date.now();
    await locker.query('COMMIT');
    await locker.end();
    expect(early, 'no redirect while the session cannot be saved').toBe(0);
    const res = await answer;
    res.resume();
    expect(res.statusCode).toBe(303);
    expect(headersAt >= releasedAt).toBeTruthy();
    const shown = await s.get(String(res.headers.location));
    expect(shown.text, 'the page the redirect leads to shows the message').toMatch(/The client system was saved/);
  });
});
