import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import type { Db } from '../../src/db/db.ts';
import { startDispatcher } from '../../src/webhooks/dispatcher.ts';
import { createOutbox } from '../../src/webhooks/events.ts';
import { claimDueDeliveries } from '../../src/webhooks/delivery-queries.ts';
import { createWebhookService } from '../../src/webhooks/service.ts';
import { createMigratedDatabase, TEST_ENV } from '../helpers/app.ts';
import { eventually, sleep, startHeldReceiver } from './receiver.ts';

const config = loadConfig({ ...TEST_ENV, WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_BACKOFF_MS: '100' });

/**
 * Turning a webhook off closes its pending deliveries but those leased to a dispatcher, which
 * its record closes. When that record never comes (the dispatcher stopped or died, or the
 * record failed), the lease runs out, and no claim takes a delivery of a webhook that is off:
 * without more it stayed pending for ever (never pruned, in the outbox depth, and sent if the
 * webhook was turned on again). Found by a review helper.
 */
describe('deliveries of a webhook turned off while they were leased', () => {
  let t: Awaited<ReturnType<typeof createMigratedDatabase>>;
  beforeAll(async () => {
    t = await createMigratedDatabase();
  });
  afterAll(() => t.drop());

  const webhook = async (url: string, active: boolean) =>
    (await t.db.query<{ id: number }>(
      "INSERT INTO webhooks (url, events, secret, active, disabled_reason) VALUES ($1, '{user.login}', 'a-webhook-secret-of-some-length', $2, $3) RETURNING id",
      [url, active, active ? null : 'receiver answered 410 Gone'],
    )).rows[0].id;
  const delivery = async (webhookId: number, lockedUntil: string | null) =>
    (await t.db.query<{ id: string }>(
      `INSERT INTO webhook_deliveries (id, webhook_id, event, data, locked_until) VALUES (gen_random_uuid(), $1, 'user.login', '{}', now() + $2::interval) RETURNING id`,
      [webhookId, lockedUntil],
    )).rows[0].id;
  const state = async (id: string) =>
    (await t.db.query<{ status: string; last_error: string | null; leased: boolean }>(
      'SELECT status, last_error, locked_until IS NOT NULL AS leased FROM webhook_deliveries WHERE id = $1', [id])).rows[0];

  it('are closed by the next claim once nobody holds their lease; one still leased is left to its dispatcher', async () => {
    const off = await webhook('http://127.0.0.1:9/off', false);
    const on = await webhook('http://127.0.0.1:9/on', true);
    const expired = await delivery(off, '-1 second');
    const unleased = await delivery(off, null);
    const held = await delivery(off, '1 hour');
    const due = await delivery(on, null);
    const claimed = await claimDueDeliveries(t.db, 10, 30_000);
    expect(claimed.map((d) => d.id)).toStrictEqual([due]);
    expect(await state(expired)).toStrictEqual({ status: 'failed', last_error: 'receiver answered 410 Gone', leased: false });
    expect(await state(unleased)).toStrictEqual({ status: 'failed', last_error: 'receiver answered 410 Gone', leased: false });
    expect(await state(held)).toStrictEqual({ status: 'pending', last_error: null, leased: true });
    await t.db.query('DELETE FROM webhooks WHERE id = ANY($1::int[])', [[off, on]]);
  });

  it('is closed once its lease has run out when its record failed, and is not sent when the webhook is turned on again', async () => {
    const LEASE_MS = 2_000;
    const receiver = await startHeldReceiver(); // the first attempt is in flight while the webhook is turned off
    const webhookId = await webhook(receiver.url, true);
    const deliveryId = randomUUID();
    await t.db.query("INSERT INTO webhook_deliveries (id, webhook_id, event, data) VALUES ($1, $2, 'user.login', '{}')", [deliveryId, webhookId]);
    // the dispatcher's record of that attempt fails (an outage at that moment): its own database
    // handle refuses the statement once
    let outage = true;
    const failing: Db = Object.create(t.db);
    failing.query = ((sql: string, params?: unknown[], options?: unknown) => {
      if (outage && sql.includes('INSERT INTO webhook_attempts')) {
        outage = false;
        return Promise.reject(Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }));
      }
      return (t.db.query as (...args: unknown[]) => Promise<unknown>)(sql, params, options);
    }) as Db['query'];
    const dispatcher = startDispatcher({
      db: failing, config, logger: pino({ level: 'silent' }), outbox: createOutbox(), pollMs: 100, concurrency: 1, leaseMs: LEASE_MS,
    });
    try {
      await eventually(async () => receiver.received.length === 1, 5_000, 'the first attempt');
      const webhooks = createWebhookService({ db: t.db, config, events: createOutbox() });
      await webhooks.setActive(webhookId, false, { via: 'admin_api', userId: null, username: 'an-admin' });
      expect((await state(deliveryId)).status, 'leased, so left to its dispatcher').toBe('pending');
      receiver.open();
      await eventually(async () => !outage, 5_000, 'the failed record');
      await eventually(async () => (await state(deliveryId)).status === 'failed', LEASE_MS + 5_000, 'the delivery closed');
      expect(await state(deliveryId)).toStrictEqual({ status: 'failed', last_error: 'disabled by an-admin', leased: false });
      await webhooks.setActive(webhookId, true, { via: 'admin_api', userId: null, username: 'an-admin' });
      await sleep(500);
      expect(receiver.received, 'the event from before is not sent again').toHaveLength(1);
    } finally {
      await dispatcher.stop();
      await receiver.close();
    }
  });
});
