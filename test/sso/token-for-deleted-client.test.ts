import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { holdLocks, waitForLockWaiters } from '../helpers/locks.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';

/*
 * sso_tokens has no foreign keys (migrations/0021). A browser's sign-in reads its client when the
 * request begins and writes the token after bcrypt: a client deleted in between must get no token
 * (an orphan its delete trigger never saw, which a client registered again under the same id
 * would validate). The issue holds the client while it writes, or finds it gone.
 */
describe('a browser-flow token issued while its client is deleted (found by a review helper)', () => {
  let app: TestApp;
  beforeAll(async () => { app = await startTestApp(); });
  afterAll(() => app?.close());

  function sidOf(browser: ReturnType<typeof formSession>): string {
    const value = decodeURIComponent(browser.cookies.get('auth.sid') ?? '');
    return value.slice(2, value.lastIndexOf('.'));
  }

  it.runIf(onPostgres)('is not recorded (and so cannot be validated by a client later registered under the same id)', async () => {
    const user = await makeUser(app);
    const client = await makeClient(app);
    const browser = formSession(app.app);
    const page = await browser.get(`/sso/login?client_id=${client.client_id}`);
    const first = await browser.post('/sso/login', {
      _csrf: hiddenField(page.text, '_csrf'), step: 'password', client_id: client.client_id, login: user.username, password: user.password,
    });
    expect(first.status, first.text).toBe(303);
    await app.db.query('UPDATE sso_tokens SET used_at = now() WHERE user_id = $1', [user.id]);
    // the issue has read the client; holding the session's row stops it before its insert
    const release = await holdLocks(app.db, 'SELECT 1 FROM sessions WHERE sid = $1 FOR UPDATE', [sidOf(browser)]);
    const issuing = browser.get(`/sso/login?client_id=${client.client_id}`);
    await waitForLockWaiters(app.db, 1);
    await app.db.query('DELETE FROM clients WHERE client_id = $1', [client.client_id]); // psql, a seed file
    await release();
    const issued = await issuing;
    const orphans = await app.db.query('SELECT jti FROM sso_tokens WHERE client_id = $1', [client.client_id]);
    // a client registered again under that id (a seed file re-creating it, another system taking the free id)
    const { secret } = await app.services.clients.createClient(
      { name: 'Another system', callbackUrl: 'https://other.example/cb', allowedIps: ['127.0.0.1', '::1'], clientId: client.client_id }, { via: 'cli', username: 'test' });
    const token = issued.headers.location ? new URL(issued.headers.location, 'http://x').searchParams.get('token') : null;
    const validated = token ? await app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: secret, token }) : null;
    expect({ status: issued.status, location: issued.headers.location, tokenRows: orphans.rowCount, validated: validated?.body },
      'no token for a deleted client').toStrictEqual({ status: 400, location: undefined, tokenRows: 0, validated: undefined });
    expect(issued.text).toContain('no longer registered');
  });
});
