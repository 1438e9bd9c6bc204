import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import type { Db, QueryOptions } from '../../src/db/db.ts';
import { findUserByUsername } from '../../src/users/queries.ts';
import { deliveryLeaseMs, startDispatcher } from '../../src/webhooks/dispatcher.ts';
import { createOutbox } from '../../src/webhooks/events.ts';
import { claimDueDeliveries } from '../../src/webhooks/delivery-queries.ts';
import { createMigratedDatabase, TEST_ENV } from '../helpers/app.ts';
import { insertUserAndClient } from '../helpers/factories.ts';
import { dispatcherKit, NEVER } from './dispatcher-kit.ts';
import { eventually, sleep, startReceiver } from './receiver.ts';

const config = loadConfig({ ...TEST_ENV, WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_BACKOFF_MS: '100' });
const logger = pino({ level: 'silent' });

describe('token issues hand their user.login deliveries straight to the dispatcher', () => {
  let t: Awaited<ReturnType<typeof createMigratedDatabase>>;
  beforeAll(async () => {
    t = await createMigratedDatabase();
    await insertUserAndClient(t.db, 'handoff');
  });
  afterAll(() => t.drop());

  const { issue, onlyWebhooks, deliveries, countingClaims } = dispatcherKit(() => t.db, 'handoff', config);
  const webhookFor = async (url: string) => (await onlyWebhooks([url]))[0];

  it.each(['for user', 'by username'] as const)('sends them with no claim: the dispatcher is neither woken nor polling (issued %s)', async (way) => {
    const receiver = await startReceiver();
    const outbox = createOutbox();
    let woken = 0;
    outbox.onWake(() => woken++);
    const dispatcher = startDispatcher({ db: t.db, config, logger, outbox, pollMs: NEVER });
    try {
      const webhookId = await webhookFor(receiver.url);
      expect(outbox.handOffLeaseMs()).toBe(deliveryLeaseMs(config));
      await issue(outbox, 3, way);
      await receiver.waitFor(() => receiver.received.length === 3);
      expect(receiver.received.map((r) => r.body.data.user_id), 'each names the user the statement found').toStrictEqual(Array(3).fill((await findUserByUsername(t.db, 'handoff'))!.id));
      expect(receiver.received.map((r) => r.body.event)).toStrictEqual(['user.login', 'user.login', 'user.login']);
      expect(woken, 'handed over, not woken').toBe(0);
      await eventually(async () => (await deliveries(webhookId)).every((d) => d.status === 'succeeded' && d.attempts === 1 && !d.leased));
    } finally {
      await dispatcher.stop();
      await receiver.close();
    }
    expect(outbox.handOffLeaseMs(), 'a stopped dispatcher takes nothing more').toBe(null);
  });

  it('finished attempts of handed-over deliveries claim nothing from the table', async () => {
    const receiver = await startReceiver();
    const outbox = createOutbox();
    const { db, claims } = countingClaims();
    const dispatcher = startDispatcher({ db, config, logger, outbox, pollMs: NEVER });
    try {
      const webhookId = await webhookFor(receiver.url);
      await eventually(async () => claims() === 1); // the one look at start-up
      await issue(outbox, 5);
      await receiver.waitFor(() => receiver.received.length === 5);
      await eventually(async () => (await deliveries(webhookId)).every((d) => d.status === 'succeeded'));
      expect(claims(), 'no claim statement after the start-up one').toBe(1);
    } finally {
      await dispatcher.stop();
      await receiver.close();
    }
  });

  /** The test database, where recording attempts waits until `open()`. */
  function recordingHeld(): { db: Db; open: () => void; held: () => number } {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let held = 0;
    const db = new Proxy(t.db, {
      get(target, prop) {
        if (prop === 'query') {
          return async (sql: string, ...rest: [unknown[]?, QueryOptions?]) => {
            if (sql.includes('INSERT INTO webhook_attempts')) {
              held++;
              await gate;
            }
            return target.query(sql, ...rest);
          };
        }
        const value = Reflect.get(target, prop, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    return { db, open, held: () => held };
  }

  it('an answered attempt frees its slot while its outcome is recorded, and stop waits for the records', async () => {
    const receiver = await startReceiver();
    const outbox = createOutbox();
    const { db, open, held } = recordingHeld();
    const dispatcher = startDispatcher({ db, config, logger, outbox, pollMs: NEVER, concurrency: 1 });
    let stopped = false;
    try {
      const webhookId = await webhookFor(receiver.url);
      await issue(outbox, 3);
      // one slot, no record written yet: each delivery went out once the one before was answered
      await receiver.waitFor(() => receiver.received.length === 3);
      await eventually(async () => held() > 0);
      expect((await deliveries(webhookId)).every((d) => d.status === 'pending' && d.leased), 'none recorded yet').toBeTruthy();
      const stopping = dispatcher.stop().then(() => (stopped = true));
      await sleep(100);
      expect(stopped, 'stop waits for the outcomes to be recorded').toBe(false);
      open();
      await stopping;
      expect((await deliveries(webhookId)).map((d) => [d.status, d.attempts, d.leased])).toStrictEqual(Array(3).fill(['succeeded', 1, false]));
    } finally {
      open();
      await dispatcher.stop();
      await receiver.close();
    }
  });

  it('past four unrecorded attempts per slot, an answered attempt keeps its slot until it is recorded', async () => {
    const receiver = await startReceiver();
    const outbox = createOutbox();
    const { db, open } = recordingHeld();
    const dispatcher = startDispatcher({ db, config, logger, outbox, pollMs: NEVER, concurrency: 1 });
    try {
      const webhookId = await webhookFor(receiver.url);
      await issue(outbox, 6);
      await receiver.waitFor(() => receiver.received.length === 5);
      await sleep(200);
      expect(receiver.received.length, 'the fifth answered attempt holds the only slot while four wait to be recorded').toBe(5);
      open();
      await receiver.waitFor(() => receiver.received.length === 6);
      await eventually(async () => (await deliveries(webhookId)).every((d) => d.status === 'succeeded' && d.attempts === 1));
    } finally {
      open();
      await dispatcher.stop();
      await receiver.close();
    }
  });

  it('with more due in the table than free slots, finished attempts claim the rest', async () => {
    const receiver = await startReceiver(async () => {
      await sleep(50);
      return 200;
    });
    const webhookId = await webhookFor(receiver.url);
    await issue(createOutbox(), 5); // no dispatcher in the process: written unclaimed
    const { db, claims } = countingClaims();
    const dispatcher = startDispatcher({ db, config, logger, outbox: createOutbox(), pollMs: NEVER, concurrency: 2 });
    try {
      await receiver.waitFor(() => receiver.received.length === 5);
      await eventually(async () => (await deliveries(webhookId)).every((d) => d.status === 'succeeded' && d.attempts === 1));
      expect(claims() >= 3, `5 deliveries through 2 slots take at least 3 claims, made ${claims()}`).toBeTruthy();
    } finally {
      await dispatcher.stop();
      await receiver.close();
    }
  });

  it('without a dispatcher in the process they are written unclaimed and the commit wakes', async () => {
    const outbox = createOutbox();
    let woken = 0;
    outbox.onWake(() => woken++);
    const webhookId = await webhookFor('http://127.0.0.1:9/none');
    await issue(outbox, 1);
    expect(woken).toBe(1);
    expect((await deliveries(webhookId)).map((d) => [d.attempts, d.leased])).toStrictEqual([[0, false]]);
  });

  it('a delivery handed over and lost is claimed again once its lease has run out', async () => {
    const outbox = createOutbox();
    outbox.onHandOff(60_000, () => {}); // a taker that dies with what it was given
    const webhookId = await webhookFor('http://127.0.0.1:9/none');
    await issue(outbox, 1);
    expect(await claimDueDeliveries(t.db, 10, 1000), 'leased: nobody else may send it').toStrictEqual([]);
    await t.db.query("UPDATE webhook_deliveries SET locked_until = now() - interval '1 second' WHERE webhook_id = $1", [webhookId]);
    const [claimed] = await claimDueDeliveries(t.db, 10, 1000);
    expect(claimed.webhook_id).toBe(webhookId);
    expect(claimed.attempts).toBe(2);
    await t.db.query("UPDATE webhook_deliveries SET status = 'failed' WHERE webhook_id = $1", [webhookId]);
  });

  it('on stop, gives back what it was handed but had not begun, and another dispatcher sends it once', async () => {
    const receiver = await startReceiver(async () => {
      await sleep(300);
      return 200;
    });
    const outbox = createOutbox();
    const first = startDispatcher({ db: t.db, config, logger, outbox, pollMs: NEVER, concurrency: 1 });
    try {
      const webhookId = await webhookFor(receiver.url);
      await issue(outbox, 3);
      await receiver.waitFor(() => receiver.received.length === 1);
      await first.stop(); // the attempt under way finishes; the other two were only handed over
      const rows = await deliveries(webhookId);
      expect(rows.map((d) => d.status).sort()).toStrictEqual(['pending', 'pending', 'succeeded']);
      expect(rows.filter((d) => d.status === 'pending').every((d) => d.attempts === 0 && !d.leased), JSON.stringify(rows)).toBeTruthy();
      expect(receiver.received.length).toBe(1);

      const second = startDispatcher({ db: t.db, config, logger, outbox: createOutbox(), pollMs: NEVER });
      try {
        await receiver.waitFor(() => receiver.received.length === 3);
        await eventually(async () => (await deliveries(webhookId)).every((d) => d.status === 'succeeded' && d.attempts === 1));
        expect(new Set(receiver.received.map((r) => r.headers['x-auth-delivery'])).size, 'each delivery sent once').toBe(3);
      } finally {
        await second.stop();
      }
    } finally {
      await receiver.close();
    }
  });
});
