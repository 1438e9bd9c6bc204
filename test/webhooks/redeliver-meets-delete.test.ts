import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { holdLocks, waitForLockWaiters } from '../helpers/locks.ts';
import { adminHeaders, registerWebhook, startReceiver } from '../webhooks/receiver.ts';

/**
 * A redelivery locks the webhook, then the delivery: the order in which deleting a webhook (its
 * cascade) and turning one off take them. Locking the delivery first (an earlier version of
 * this session's fix) deadlocked with a delete, and one of the two answered 500. Found by a
 * review helper.
 */
describe.runIf(onPostgres)('redeliver meeting a webhook delete', () => {
  let app: TestApp;
  let headers: Record<string, string>;
  beforeAll(async () => {
    app = await startTestApp({ WEBHOOK_BACKOFF_MS: '3600000' });
    headers = await adminHeaders(app);
  });
  afterAll(() => app?.close());

  const finished = async (webhookId: number) =>
    (await app.db.query<{ id: string }>(
      "INSERT INTO webhook_deliveries (id, webhook_id, event, data, status, completed_at) VALUES (gen_random_uuid(), $1, 'user.login', '{}', 'failed', now()) RETURNING id",
      [webhookId],
    )).rows[0].id;

  it('a redeliver while an administrator deletes the webhook is 404 (or 202), neither request fails with a deadlock', async () => {
    const receiver = await startReceiver();
    try {
      const id = await registerWebhook(app, headers, { url: receiver.url, events: ['user.login'] });
      const first = await finished(id);
      const second = await finished(id);
      // stands for any delay between the webhook row's lock and the cascade reaching the deliveries
      const release = await holdLocks(app.db, 'SELECT 1 FROM webhook_deliveries WHERE id = $1 FOR UPDATE', [first]);
      const deleting = app.http.delete(`/api/webhooks/${id}`, { headers });
      await waitForLockWaiters(app.db, 1);
      const resending = app.http.post(`/api/webhooks/${id}/deliveries/${second}/redeliver`, {}, { headers });
      await Promise.race([resending, waitForLockWaiters(app.db, 2)]);
      await release();
      const [deleted, resent] = await Promise.all([deleting, resending]);
      expect(deleted.status, deleted.text).toBeLessThan(300);
      expect([202, 404], resent.text).toContain(resent.status);
    } finally {
      await receiver.close();
    }
  });
});
