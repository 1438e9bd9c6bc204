import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient } from '../helpers/factories.ts';
import { adminHeaders, eventually, registerWebhook, sleep, startHeldReceiver, startReceiver } from './receiver.ts';

/**
 * An administrator moves a webhook to a new URL while an attempt to the old URL is on its way;
 * the old receiver (decommissioned, hence "Gone") answers 410. That answer is about the old URL:
 * it must not disable the webhook that now points at the new receiver.
 */
describe('a 410 from the URL a webhook was moved away from', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ WEBHOOK_TIMEOUT_MS: '5000', WEBHOOK_BACKOFF_MS: '100' });
  });
  afterAll(() => app?.close());

  it('leaves the moved webhook active, and later events reach the new URL', async () => {
    const old = await startHeldReceiver(Infinity, () => 410);
    const moved = await startReceiver();
    try {
      const admin = await adminHeaders(app);
      const id = await registerWebhook(app, admin, { url: old.url, events: ['client.registered'] });
      await makeClient(app);
      await eventually(async () => old.received.length === 1, 5000, 'the attempt to the old URL');
      const patched = await app.http.patch(`/api/webhooks/${id}`, { url: moved.url }, { headers: admin });
      expect(patched.status, patched.text).toBe(200);
      old.open();
      await eventually(async () => (await app.db.query("SELECT 1 FROM webhook_deliveries WHERE webhook_id = $1 AND status <> 'pending'", [id])).rows.length > 0
        || (await app.db.query('SELECT 1 FROM webhooks WHERE id = $1 AND NOT active', [id])).rows.length > 0);
      await sleep(300);
      const hook = (await app.http.get('/api/webhooks', { headers: admin })).body.find((w: { id: number }) => w.id === id);
      expect({ active: hook.active, disabled_reason: hook.disabled_reason }).toStrictEqual({ active: true, disabled_reason: null });
      await makeClient(app);
      await moved.waitFor(() => moved.of('client.registered').length >= 1, 3000);
    } finally {
      old.open();
      await old.close();
      await moved.close();
    }
  }, 30_000);
});
