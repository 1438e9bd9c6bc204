import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { holdLocks, waitForLockWaiters } from '../helpers/locks.ts';
import { enrolledUser, totpCode } from './support.ts';

/*
 * A sign-in spends its TOTP code (an UPDATE of the user's row) in its success transaction.
 * Two sign-ins of one user with one code (a double-submitted form, two devices) must not each
 * hold the row FOR SHARE (credentialsNow) and wait for the other to update it: a deadlock,
 * answered 500. The loser answers 401 totp_reused.
 */
describe('two TOTP sign-ins of one user at once (found by a review helper)', () => {
  let app: TestApp;
  beforeAll(async () => { app = await startTestApp(); });
  afterAll(() => app?.close());

  it.runIf(onPostgres)('one signs in, the other is refused as a reused code: never a 500 (deadlock)', async () => {
    const { user, secret } = await enrolledUser(app);
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
