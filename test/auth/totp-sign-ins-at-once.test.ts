import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { makeUser } from '../helpers/factories.ts';
import { holdLocks, waitForLockWaiters } from '../helpers/locks.ts';
import { signIn, totpCode } from './support.ts';

/*
 * 1ab0426 moved claimTotpStep (UPDATE users) into login's success transaction, AFTER
 * credentialsNow took the user's row FOR SHARE. Two sign-ins of one user with a TOTP code
 * (a double-submitted form, two devices) each hold FOR SHARE and each wait to UPDATE: a
 * deadlock, answered 500. Before, the claim was its own statement before the transaction and
 * the loser answered 401 totp_reused.
 */
describe('two TOTP sign-ins of one user at once (found by a review helper)', () => {
  let app: TestApp;
  beforeAll(async () => { app = await startTestApp(); });
  afterAll(() => app?.close());

  it.runIf(onPostgres)('one signs in, the other is refused as a reused code: never a 500 (deadlock)', async () => {
    const user = await makeUser(app);
    const { cookie } = await signIn(app, user.username, user.password);
    const headers = { cookie: cookie! };
    const secret = (await app.http.post('/api/user/2fa/setup', undefined, { headers })).body.secret as string;
    const enabled = await app.http.post('/api/user/2fa/enable', { code: await totpCode(secret, -1), current_password: user.password }, { headers });
    expect(enabled.status, enabled.text).toBe(200);
    const code = await totpCode(secret);
    // a reader of the user's row (as a concurrent sign-in's credentialsNow is) makes both sign-ins'
    // claims wait until both hold their own FOR SHARE on the row
    const release = await holdLocks(app.db, 'SELECT 1 FROM users WHERE id = $1 FOR SHARE', [user.id]);
    const attempts = [0, 1].map(() => app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: code }));
    await waitForLockWaiters(app.db, 2);
    await release();
    const answers = await Promise.all(attempts);
    expect(answers.map((a) => [a.status, a.body.error]).sort(), answers.map((a) => a.text).join('\n'))
      .toStrictEqual([[200, undefined], [401, 'totp_reused']]);
  });
});
