import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { HANDED_PER_SLOT, startDispatcher } from '../../src/webhooks/dispatcher.ts';
import { createOutbox } from '../../src/webhooks/events.ts';
import { createWebhookService } from '../../src/webhooks/service.ts';
import { signBody } from '../../src/webhooks/verify.ts';
import { createMigratedDatabase, TEST_ENV } from '../helpers/app.ts';
import { insertUserAndClient } from '../helpers/factories.ts';
import { dispatcherKit, NEVER } from './dispatcher-kit.ts';
import { eventually, sleep, startHeldReceiver, startReceiver } from './receiver.ts';

const config = loadConfig({ ...TEST_ENV, WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_BACKOFF_MS: '100' });
/** For tests that hold an attempt open: attempts time out after 10 s, not 1 s. */
const patient = loadConfig({ ...TEST_ENV, WEBHOOK_TIMEOUT_MS: '10000', WEBHOOK_BACKOFF_MS: '100' });
const SECRET = 'waiting-secret-0123456789';
const NEW_SECRET = 'waiting-new-secret-9876543210';

/** Deliveries that wait in a dispatcher's memory for a slot (one slot here: concurrency 1). */
describe('deliveries waiting for a slot', () => {
  let t: Awaited<ReturnType<typeof createMigratedDatabase>>;
  beforeAll(async () => {
    t = await createMigratedDatabase();
    await insertUserAndClient(t.db, 'waiting');
  });
  afterAll(() => t.drop());

  // tokens issued together: their user.login deliveries are handed to the dispatcher of the outbox in one go
  const { issue, onlyWebhooks, deliveries } = dispatcherKit(() => t.db, 'waiting', config);
  /** The only active webhooks from now on: these URLs, subscribed to user.login, signed with SECRET. */
  const webhooksFor = (...urls: string[]) => onlyWebhooks(urls, SECRET);

  /** A receiver that holds its first request until `open()`, answering it `status`; the others it answers 200 at once. */
  const heldReceiver = (status = 200) => startHeldReceiver(1, (index) => (index === 0 ? status : 200));

  const logLines: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => logLines.push(line) });

  it('one that waited until its lease nears its end is given back, not sent: two dispatchers send each delivery once', async () => {
    // Leases of 3 s, attempts of up to 1 s: a delivery may wait 1 s for its slot. Ten of 400 ms
    // through one slot take 4 s, past the lease: the dispatcher they were handed to sends the
    // first few and gives the rest back, which the other one (polling) and it share.
    const receiver = await startReceiver(async () => {
      await sleep(400);
      return 200;
    });
    const [webhookId] = await webhooksFor(receiver.url);
    const outbox = createOutbox();
    const options = { db: t.db, config, logger, leaseMs: 3000, concurrency: 1, pollMs: 100 };
    const first = startDispatcher({ ...options, outbox });
    const second = startDispatcher({ ...options, outbox: createOutbox() });
    try {
      await issue(outbox, 10);
      await eventually(async () => (await deliveries(webhookId)).every((d) => d.status === 'succeeded'), 30_000, 'all ten delivered');
    } finally {
      await first.stop();
      await second.stop();
      await receiver.close();
    }
    const ids = receiver.received.map((r) => String(r.headers['x-auth-delivery']));
    expect(ids.length, `${ids.length} requests for ${new Set(ids).size} deliveries`).toBe(10);
    expect(new Set(ids).size).toBe(10);
    expect((await deliveries(webhookId)).map((d) => d.attempts), 'a delivery given back has no attempt counted for it').toStrictEqual(Array(10).fill(1));
  });

  it(`past ${HANDED_PER_SLOT} waiting per slot, the surplus is given back to the table at once`, async () => {
    const receiver = await heldReceiver();
    const [webhookId] = await webhooksFor(receiver.url);
    const outbox = createOutbox();
    const dispatcher = startDispatcher({ db: t.db, config: patient, logger, outbox, pollMs: NEVER, concurrency: 1 });
    try {
      await issue(outbox, HANDED_PER_SLOT + 4); // one in the slot, HANDED_PER_SLOT waiting, three given back
      await eventually(async () => receiver.received.length === 1, 10_000, 'the first attempt');
      await eventually(async () => (await deliveries(webhookId)).filter((d) => d.status === 'pending' && !d.leased && d.attempts === 0).length === 3,
        10_000, 'three deliveries given back');
      expect(receiver.received.length).toBe(1);
      receiver.open();
      // the slot, once free, takes the waiting ones and then claims those given back
      await eventually(async () => (await deliveries(webhookId)).every((d) => d.status === 'succeeded' && d.attempts === 1), 10_000, 'all delivered once');
      expect(new Set(receiver.received.map((r) => r.headers['x-auth-delivery'])).size).toBe(HANDED_PER_SLOT + 4);
      expect(receiver.received.length).toBe(HANDED_PER_SLOT + 4);
    } finally {
      receiver.open();
      await dispatcher.stop();
      await receiver.close();
    }
  });

  /**
   * Two webhooks, three tokens: six deliveries, alternating between the webhooks. The first
   * (to `changed`) holds the only slot until the test opens it; the five others wait. `change`
   * happens meanwhile; once `control` has its three, the dispatcher has dealt with every one
   * waiting for `changed`.
   */
  async function whileWaiting(change: (webhookId: number, service: ReturnType<typeof createWebhookService>) => Promise<void>, changedStatus = 200) {
    const changed = await heldReceiver(changedStatus);
    const control = await startReceiver();
    const [webhookId, controlId] = await webhooksFor(changed.url, control.url);
    const outbox = createOutbox();
    const service = createWebhookService({ db: t.db, config, events: outbox });
    logLines.length = 0;
    const dispatcher = startDispatcher({ db: t.db, config: patient, logger, outbox, pollMs: NEVER, concurrency: 1 });
    try {
      await issue(outbox, 3);
      await eventually(async () => changed.received.length === 1, 10_000, 'the first attempt');
      await change(webhookId, service);
      changed.open();
      await control.waitFor(() => control.received.length === 3);
      await eventually(async () => (await deliveries(controlId)).every((d) => d.status === 'succeeded'), 10_000, 'control deliveries recorded');
    } finally {
      changed.open();
      await dispatcher.stop();
      await changed.close();
      await control.close();
    }
    return { changed, webhookId, rows: await deliveries(webhookId) };
  }

  const admin = { userId: null, username: 'waiting-admin', via: 'admin_api' as const };

  it('a webhook turned off meanwhile (PATCH active: false) gets none of them, and they are closed as failed', async () => {
    const { changed, rows } = await whileWaiting((id, service) => service.update(id, { active: false }, admin).then(() => {}));
    expect(changed.received.length, 'only the attempt already under way').toBe(1);
    expect(rows.map((d) => [d.status, d.attempts, d.leased]).sort()).toStrictEqual([['failed', 0, false], ['failed', 0, false], ['succeeded', 1, false]]);
    expect(rows.filter((d) => d.status === 'failed').map((d) => d.last_error)).toStrictEqual(Array(2).fill('disabled by waiting-admin'));
  });

  it('a webhook disabled from the panel meanwhile gets none of them', async () => {
    const { changed, rows } = await whileWaiting((id, service) => service.setActive(id, false, { ...admin, via: 'admin_panel' }));
    expect(changed.received.length).toBe(1);
    expect(rows.map((d) => d.status).sort()).toStrictEqual(['failed', 'failed', 'succeeded']);
  });

  it('a receiver answering 410 gets none of those waiting behind its attempt', async () => {
    const { changed, rows, webhookId } = await whileWaiting(async () => {}, 410);
    expect(changed.received.length).toBe(1);
    expect(rows.map((d) => [d.status, d.attempts]).sort()).toStrictEqual([['failed', 0], ['failed', 0], ['failed', 1]]);
    expect((await t.db.query('SELECT active, disabled_reason FROM webhooks WHERE id = $1', [webhookId])).rows[0]).toStrictEqual({ active: false, disabled_reason: 'receiver answered 410 Gone' });
  });

  it('a webhook deleted meanwhile gets none of them, and nothing fails to be recorded', async () => {
    const { changed, rows } = await whileWaiting((id, service) => service.remove(id, admin));
    expect(changed.received.length).toBe(1);
    expect(rows).toStrictEqual([]);
    // the attempt under way could not be recorded (its delivery is gone); none other was made
    expect(logLines.filter((l) => l.includes('could not record a webhook attempt')).length).toBeLessThanOrEqual(1);
  });

  it('a new URL and secret set meanwhile apply to them', async () => {
    const moved = await startReceiver();
    try {
      const { changed, rows } = await whileWaiting((id, service) => service.update(id, { url: moved.url, secret: NEW_SECRET }, admin).then(() => {}));
      expect(changed.received.length, 'only the attempt already under way went to the old URL').toBe(1);
      expect(changed.received[0].headers['x-auth-signature']).toBe(signBody(changed.received[0].raw, SECRET));
      expect(moved.received.length).toBe(2);
      for (const r of moved.received) expect(r.headers['x-auth-signature'], 'signed with the new secret').toBe(signBody(r.raw, NEW_SECRET));
      expect(rows.map((d) => [d.status, d.attempts])).toStrictEqual(Array(3).fill(['succeeded', 1]));
    } finally {
      await moved.close();
    }
  });
});
