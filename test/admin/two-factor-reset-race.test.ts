import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { makeUser } from '../helpers/factories.ts';
import { holdLocks, waitForLockWaiters } from '../helpers/locks.ts';
import { auditOf, type SignedIn, signedIn } from './support.ts';

describe('an administrator resets two-factor while the user turns it on', () => {
  let app: TestApp;
  let admin: SignedIn;
  beforeAll(async () => {
    app = await startTestApp();
    admin = await signedIn(app, 'admin');
  });
  afterAll(() => app?.close());

  // The audit's was_enabled is what the reset turned off: read in the reset's transaction,
  // after the user's row is locked, not from the record read before it.
  it.runIf(onPostgres)('the audit says two-factor was on when an enabling committed while the reset waited', async () => {
    const user = await makeUser(app);
    // the user's enabling, not yet committed: the reset reads the row before it and then waits for it
    const commitEnabling = await holdLocks(app.db, "UPDATE users SET totp_enabled = true, totp_secret = 'JBSWY3DPEHPK3PXP' WHERE id = $1", [user.id]);
    const resetting = app.http.post(`/api/admin/users/${user.id}/reset-2fa`, undefined, admin.as);
    await waitForLockWaiters(app.db, 1);
    await commitEnabling();
    const res = await resetting;
    expect(res.status).toBe(200);
    expect(res.body.totp_enabled).toBe(false);
    const [row] = await auditOf(app, 'user.2fa_reset');
    expect(row.user_id).toBe(user.id);
    expect(row.details.was_enabled, 'two-factor was on when the reset turned it off').toBe(true);
  });

  it('the audit says two-factor was off when it was never on', async () => {
    const user = await makeUser(app);
    const res = await app.http.post(`/api/admin/users/${user.id}/reset-2fa`, undefined, admin.as);
    expect(res.status).toBe(200);
    const [row] = await auditOf(app, 'user.2fa_reset');
    expect(row.user_id).toBe(user.id);
    expect(row.details.was_enabled).toBe(false);
  });
});
