import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { writeTogether } from '../../src/db/statement.ts';
import { startDispatcher } from '../../src/webhooks/dispatcher.ts';
import { createOutbox } from '../../src/webhooks/events.ts';
import { createMigratedDatabase, TEST_ENV } from '../helpers/app.ts';
import { sleep, startReceiver } from './receiver.ts';

const config = loadConfig({ ...TEST_ENV, WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_BACKOFF_MS: '100' });
const logger = pino({ level: 'silent' });
/** Polls once an hour: whatever arrives sooner came from the commit, not from a poll. */
const NEVER = 3_600_000;

describe('events recorded in a transaction go out after its commit, by the unit of work', () => {
  let t: Awaited<ReturnType<typeof createMigratedDatabase>>;
  beforeAll(async () => {
    t = await createMigratedDatabase();
  });
  afterAll(() => t.drop());

  async function webhookFor(url: string): Promise<number> {
    await t.db.query('UPDATE webhooks SET active = false');
    return (await t.db.query<{ id: number }>(
      "INSERT INTO webhooks (url, events, secret) VALUES ($1, '{user.logout}', 'unit-of-work-secret-0123') RETURNING id", [url])).rows[0].id;
  }

  it('a committed event is delivered at once, the dispatcher woken once after COMMIT and not before', async () => {
    const receiver = await startReceiver();
    const outbox = createOutbox();
    let woken = 0;
    outbox.onWake(() => woken++);
    const dispatcher = startDispatcher({ db: t.db, config, logger, outbox, pollMs: NEVER });
    try {
      await webhookFor(receiver.url);
      await sleep(100); // the dispatcher's one look at start-up is done
      await t.db.transaction(async (tx) => {
        await outbox.record(tx, 'user.logout', { user_id: 1, marker: 'first' });
        await outbox.record(tx, 'user.logout', [{ user_id: 1, marker: 'second' }]);
        expect(woken, 'nothing is woken before the commit').toBe(0);
      });
      expect(woken, 'woken once for the whole transaction').toBe(1);
      await receiver.waitFor(() => receiver.received.length === 2);
      expect(receiver.received.map((r) => r.body.data.marker).sort()).toStrictEqual(['first', 'second']);
    } finally {
      await dispatcher.stop();
      await receiver.close();
    }
  });

  it('an event no active webhook is subscribed to writes nothing and wakes nothing; one that has a subscriber wakes once', async () => {
    const outbox = createOutbox();
    let woken = 0;
    outbox.onWake(() => woken++);
    const url = 'http://127.0.0.1:9/unit-of-work-unsubscribed';
    await webhookFor(url); // subscribed to user.logout only
    try {
      const before = (await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook_deliveries')).rows[0].n;
      await t.db.transaction(async (tx) => {
        await outbox.record(tx, 'user.login', { user_id: 1, marker: 'nobody listens' });
        await outbox.record(tx, 'user.locked', [{ user_id: 1 }, { user_id: 2 }]);
      });
      await outbox.record(t.db, 'user.login', { user_id: 1, marker: 'outside a transaction' });
      expect(woken, 'no delivery written: the dispatcher has nothing to claim').toBe(0);
      expect((await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook_deliveries')).rows[0].n).toBe(before);
      await t.db.transaction(async (tx) => {
        await outbox.record(tx, 'user.login', { user_id: 1, marker: 'still nobody' });
        await outbox.record(tx, 'user.logout', { user_id: 1, marker: 'subscribed' });
      });
      expect(woken, 'one delivery written: woken once, after the commit').toBe(1);
      await outbox.record(t.db, 'user.logout', { user_id: 1, marker: 'subscribed, outside a transaction' });
      expect(woken).toBe(2);
      await t.db.transaction(async (tx) => {
        await outbox.record(tx, 'user.logout', [{ user_id: 1, marker: 'a batch' }, { user_id: 2, marker: 'a batch' }]);
      });
      expect(woken, 'a batch with a subscriber wakes once').toBe(3);
    } finally {
      await t.db.query('DELETE FROM webhooks WHERE url = $1', [url]);
    }
  });

  it('an event recorded in a rolled-back transaction is never delivered, and nothing is woken or handed over', async () => {
    const receiver = await startReceiver();
    const outbox = createOutbox();
    let woken = 0;
    outbox.onWake(() => woken++);
    const dispatcher = startDispatcher({ db: t.db, config, logger, outbox, pollMs: 200 });
    try {
      const webhookId = await webhookFor(receiver.url);
      await expect(t.db.transaction(async (tx) => {
        await outbox.record(tx, 'user.logout', { user_id: 1, marker: 'rolled back' });
        await writeTogether(tx, [outbox.part('user.logout', [{ user_id: 1, marker: 'rolled back, leased' }])]);
        throw new Error('the use case fails after recording');
      })).rejects.toThrow('the use case fails');
      await sleep(600); // several polls
      expect(woken).toBe(0);
      expect(receiver.received).toStrictEqual([]);
      expect((await t.db.query('SELECT 1 FROM webhook_deliveries WHERE webhook_id = $1', [webhookId])).rowCount).toBe(0);
    } finally {
      await dispatcher.stop();
      await receiver.close();
    }
  });

  it('a statement part written in a transaction is handed over only once that transaction commits', async () => {
    const receiver = await startReceiver();
    const outbox = createOutbox();
    const dispatcher = startDispatcher({ db: t.db, config, logger, outbox, pollMs: NEVER });
    try {
      await webhookFor(receiver.url);
      await t.db.transaction(async (tx) => {
        await writeTogether(tx, [outbox.part('user.logout', [{ user_id: 1, marker: 'handed' }])]);
        await sleep(200);
        expect(receiver.received, 'not before the commit').toStrictEqual([]);
      });
      await receiver.waitFor(() => receiver.received.length === 1);
      expect(receiver.received[0].body.data.marker).toBe('handed');
    } finally {
      await dispatcher.stop();
      await receiver.close();
    }
  });
});
