import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SignedIn, signedIn } from '../admin/support.ts';
import { signIn } from '../auth/support.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { makeUser } from '../helpers/factories.ts';
import { holdLocks, waitForLockWaiters } from '../helpers/locks.ts';
import { eventually, resetToken, startSmtpServer } from './smtp.ts';

/**
 * A forgot-password request finds its user, then makes the link under the user's row lock.
 * An administrator's change of the address committed in between kills the user's links; the
 * link made after it goes to the address as it is then, never to the one taken away. Forced
 * by holding the user's row from a second connection (PostgreSQL only). Found by a review helper.
 */
describe.runIf(onPostgres)('a reset request meeting an administrator\'s change of the account', () => {
  let app: TestApp;
  let smtp: Awaited<ReturnType<typeof startSmtpServer>>;
  let admin: SignedIn;
  beforeAll(async () => {
    smtp = await startSmtpServer();
    app = await startTestApp({ SMTP_URL: smtp.url, PUBLIC_URL: 'https://sso.example.test' });
    admin = await signedIn(app, 'admin');
  });
  afterAll(async () => {
    await app?.close();
    await smtp?.close();
  });

  it('mails the link to the new address, never to the one taken away', async () => {
    const user = await makeUser(app);
    const oldAddress = user.email;
    const newAddress = `new-owner-${user.id}@example.com`;
    // the row is busy for a moment (any writer of it) while the administrator moves the address...
    const release = await holdLocks(app.db, 'SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE', [user.id]);
    const moved = app.http.patch(`/api/admin/users/${user.id}`, { email: newAddress }, admin.as);
    await waitForLockWaiters(app.db, 1);
    // ...and someone asks for a reset link of the account, found with the old address
    expect((await app.http.post('/api/auth/password/forgot', { login: user.username })).status).toBe(202);
    await waitForLockWaiters(app.db, 2);
    await release();
    expect((await moved).status).toBe(200);

    const mail = await eventually(() => smtp.to(newAddress)[0], 'a message to the new address');
    expect(smtp.to(oldAddress), 'nothing for the mailbox the address was taken away from').toStrictEqual([]);
    const used = await app.http.post('/api/auth/password/reset', { token: resetToken(mail), new_password: 'chosen by the new mailbox 7' });
    expect(used.status, used.text).toBe(200);
    expect((await signIn(app, user.username, user.password)).res.status, 'the old password is gone').toBe(401);
  });

  it('makes no link for a user deactivated meanwhile', async () => {
    const user = await makeUser(app);
    const release = await holdLocks(app.db, 'SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE', [user.id]);
    const deactivating = app.http.patch(`/api/admin/users/${user.id}`, { active: false }, admin.as);
    await waitForLockWaiters(app.db, 1);
    expect((await app.http.post('/api/auth/password/forgot', { login: user.username })).status).toBe(202);
    await waitForLockWaiters(app.db, 2);
    await release();
    expect((await deactivating).status).toBe(200);
    const audited = await eventually(async () => (await app.db.query<{ outcome: string; details: { reason?: string } }>(
      "SELECT outcome, details FROM audit_log WHERE action = 'user.password_reset_request' AND user_id = $1", [user.id])).rows[0], 'the request audited');
    expect([audited.outcome, audited.details.reason]).toStrictEqual(['failure', 'unavailable']);
    expect((await app.db.query('SELECT 1 FROM password_resets WHERE user_id = $1', [user.id])).rowCount).toBe(0);
    expect(smtp.to(user.email)).toStrictEqual([]);
  });
});
