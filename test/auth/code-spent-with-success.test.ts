import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { holdLocks, waitForLockWaiters } from '../helpers/locks.ts';
import { hashRecoveryCode } from '../../src/auth/totp.ts';
import { enrolledUser, totpCode } from './support.ts';
import { withWritesRefused } from '../helpers/refused-writes.ts';

/*
 * A second factor given with a sign-in or a password change is used up by the transaction that
 * commits the sign-in or the change, not before it: a sign-in whose transaction is lost (here
 * the database refuses its audit row, as an outage or a full disk would lose it) leaves the
 * code usable. It was spent by the check, before the password's bcrypt result was even used.
 */
describe('a two-factor code is spent with the sign-in or the change it proves, or not at all', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());

  /**
   * Runs `attempt` while the database refuses the audit row of `action`'s success for
   * `username` (the last write of the success's transaction but the event), then lets it be.
   */
  const withSuccessRefused = <T>(username: string, action: string, attempt: () => Promise<T>): Promise<T> =>
    withWritesRefused(app.db, { table: 'audit_log', ops: 'INSERT', when: `r.action = '${action}' AND r.outcome = 'success' AND r.username = '${username}'` }, attempt);

  const unusedCodes = async (userId: number) =>
    (await app.db.query<{ n: number }>('SELECT count(*)::int AS n FROM recovery_codes WHERE user_id = $1 AND used_at IS NULL', [userId])).rows[0].n;

  it('a recovery code given with a sign-in whose transaction is lost still signs in afterwards', async () => {
    const { user, recoveryCodes } = await enrolledUser(app);
    const lost = await withSuccessRefused(user.username, 'user.login', () =>
      app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: recoveryCodes[0] }));
    expect(lost.status, lost.text).toBe(500);
    expect(await unusedCodes(user.id)).toBe(10);
    const again = await app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: recoveryCodes[0] });
    expect(again.status, again.text).toBe(200);
    expect(await unusedCodes(user.id), 'spent by the sign-in that happened').toBe(9);
  });

  it('a TOTP code given with a sign-in whose transaction is lost is not taken as used', async () => {
    const { user, secret } = await enrolledUser(app);
    const code = await totpCode(secret);
    const lost = await withSuccessRefused(user.username, 'user.login', () =>
      app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: code }));
    expect(lost.status, lost.text).toBe(500);
    const again = await app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: code });
    expect(again.status, again.text).toBe(200);
    const twice = await app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: code });
    expect([twice.status, twice.body.error], 'and used once it has signed in').toStrictEqual([401, 'totp_reused']);
  });

  it('a recovery code given with a password change whose transaction is lost still changes it afterwards', async () => {
    const { user, recoveryCodes } = await enrolledUser(app);
    const body = { login: user.username, current_password: user.password, new_password: 'a brand new passphrase 7', totp: recoveryCodes[3] };
    const lost = await withSuccessRefused(user.username, 'user.password_change', () => app.http.post('/api/user/password', body));
    expect(lost.status, lost.text).toBe(500);
    expect(await unusedCodes(user.id)).toBe(10);
    const again = await app.http.post('/api/user/password', body);
    expect(again.status, again.text).toBe(200);
    expect(await unusedCodes(user.id)).toBe(9);
  });

  it.runIf(onPostgres)('of two sign-ins at once with one recovery code, both past the check, one signs in and the other is refused', async () => {
    const { user, recoveryCodes } = await enrolledUser(app);
    const code = recoveryCodes[5];
    const row = (await app.db.query<{ id: number }>('SELECT id FROM recovery_codes WHERE user_id = $1 AND code_hash = $2', [user.id, hashRecoveryCode(code)])).rows[0];
    // both find the code unused; holding its row stops the first spending, the second waits behind the first's user row
    const release = await holdLocks(app.db, 'SELECT 1 FROM recovery_codes WHERE id = $1 FOR UPDATE', [row.id]);
    const attempts = [0, 1].map(() => app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: code }));
    await waitForLockWaiters(app.db, 2);
    await release();
    const answers = await Promise.all(attempts);
    expect(answers.map((a) => [a.status, a.body.error]).sort()).toStrictEqual([[200, undefined], [401, 'invalid_totp']]);
    expect(await unusedCodes(user.id)).toBe(9);
  });
});
