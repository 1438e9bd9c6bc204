import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prunePass } from '../../src/retention/pruner.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { holdLocks, waitForLockWaiters } from '../helpers/locks.ts';
import { adminHeaders } from '../webhooks/receiver.ts';

/**
 * A redelivery asked for while the pruner deletes that delivery: the requeue locks the row it
 * reads, so it waits for the pruner and then finds nothing (404). Reading it unlocked, its
 * UPDATE found nothing after the wait and the answer fell through to 409 "still being
 * attempted" for a delivery that no longer existed. Found by a review helper.
 */
describe.skipIf(!onPostgres)('redelivering a delivery the pruner is deleting (PostgreSQL)', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ PRUNE_INTERVAL: '0', TOKEN_SWEEP_INTERVAL_MS: '3600000' });
  });
  afterAll(() => app.close());

  it('answers 404, not 409 delivery_pending', async () => {
    const admin = await adminHeaders(app);
    const webhookId = (await app.db.query<{ id: number }>(
      "INSERT INTO webhooks (url, events, secret) VALUES ('http://127.0.0.1:9/hook', '{user.2fa_enabled}', 'a-secret') RETURNING id")).rows[0].id;
    const deliveryId = randomUUID();
    await app.db.query(
      `INSERT INTO webhook_deliveries (id, webhook_id, event, data, status, attempts, last_status_code, created_at, completed_at)
       VALUES ($1, $2, 'user.2fa_enabled', '{}', 'failed', 4, 500, now() - interval '40 days', now() - interval '40 days')`, [deliveryId, webhookId]);
    await app.db.query("INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, duration_ms) VALUES ($1, 4, now() - interval '40 days', 500, 5)", [deliveryId]);

    // Another session holds the attempt row: the pruner takes the delivery's row lock and then waits on it.
    const release = await holdLocks(app.db, 'SELECT 1 FROM webhook_attempts WHERE delivery_id = $1 FOR UPDATE', [deliveryId]);
    const pruning = prunePass(app.db, app.config);
    await waitForLockWaiters(app.db, 1);
    const redelivering = app.http.post(`/api/webhooks/${webhookId}/deliveries/${deliveryId}/redeliver`, {}, { headers: admin });
    await waitForLockWaiters(app.db, 2); // the requeue waits for the pruner's row lock
    await release();
    const [report, r] = await Promise.all([pruning, redelivering]);
    expect(report.counts.webhook_deliveries).toBe(1);
    expect(r.status, r.text).toBe(404);
  }, 30_000);
});
