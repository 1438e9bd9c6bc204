import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { adminHeaders, registerWebhook, startReceiver } from '../webhooks/receiver.ts';

/**
 * Admin PATCH of a user with a new email and a new password, in one transaction: the sign-out's
 * user.logout event carries the user's address as it now is, not the one just replaced (a
 * review helper caught the all-or-nothing change sending the old one).
 */
describe('admin PATCH: email and password at once', () => {
  let app: TestApp;
  let headers: Record<string, string>;
  beforeAll(async () => {
    app = await startTestApp({ WEBHOOK_BACKOFF_MS: '3600000' });
    headers = await adminHeaders(app);
  });
  afterAll(() => app?.close());

  it("the sign-out's user.logout event carries the user's new address", async () => {
    const receiver = await startReceiver();
    try {
      const hook = await registerWebhook(app, headers, { url: receiver.url, events: ['user.logout'] });
      const user = await makeUser(app);
      const patched = await app.http.patch(`/api/admin/users/${user.id}`, { email: `renamed-${user.id}@example.org`, password: 'a brand new passphrase 7781' }, { headers });
      expect(patched.status, patched.text).toBe(200);
      expect(patched.body.email).toBe(`renamed-${user.id}@example.org`);
      const rows = (await app.db.query<{ data: { user_id: number; email: string } }>(
        "SELECT data FROM webhook_deliveries WHERE webhook_id = $1 AND event = 'user.logout'", [hook],
      )).rows.filter((r) => r.data.user_id === user.id);
      expect(rows.length).toBe(1);
      expect(rows[0].data.email).toBe(`renamed-${user.id}@example.org`);
    } finally {
      await receiver.close();
    }
  });
});
