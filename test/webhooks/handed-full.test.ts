import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { HANDED_PER_SLOT, startDispatcher } from '../../src/webhooks/dispatcher.ts';
import { createOutbox } from '../../src/webhooks/events.ts';
import { createMigratedDatabase, TEST_ENV } from '../helpers/app.ts';
import { insertUserAndClient } from '../helpers/factories.ts';
import { dispatcherKit, NEVER } from './dispatcher-kit.ts';
import { eventually, sleep, startHeldReceiver, startReceiver } from './receiver.ts';

const patient = loadConfig({ ...TEST_ENV, WEBHOOK_TIMEOUT_MS: '10000', WEBHOOK_BACKOFF_MS: '100' });
const logger = pino({ level: 'silent' });

describe('a webhook at its share with many deliveries waiting in memory (a review helper)', () => {
  let t: Awaited<ReturnType<typeof createMigratedDatabase>>;
  beforeAll(async () => {
    t = await createMigratedDatabase();
    await insertUserAndClient(t.db, 'review');
  });
  afterAll(() => t.drop());

  const { issue, addWebhook, onlyWebhooks, deliveries, countingClaims } = dispatcherKit(() => t.db, 'review', patient);
  it('another webhook with a free slot is sent at once, and no claim/give-back loop runs', async () => {
    const hung = await startHeldReceiver();
    const fast = await startReceiver();
    const [hungId] = await onlyWebhooks([hung.url]);
    const outbox = createOutbox();
    const { db, claims } = countingClaims();
    // 2 slots, 1 per webhook; at most 2 * HANDED_PER_SLOT = 32 waiting in memory, of which the
    // webhook at its share once filled all (then 2 given back), now only its part (the rest given back)
    const dispatcher = startDispatcher({ db, config: patient, logger, outbox, pollMs: NEVER, concurrency: 2 });
    try {
      await issue(outbox, 1 + 2 * HANDED_PER_SLOT + 2);
      await eventually(async () => hung.received.length === 1);
      await eventually(async () => (await deliveries(hungId)).filter((d) => !d.leased).length >= 2, 10_000, 'the surplus given back');
      const fastId = await addWebhook(fast.url);
      const before = claims();
      await issue(outbox, 1); // one delivery for each webhook; the fast one's has a free slot and a free share
      await sleep(2000);
      const made = claims() - before;
      const state = `${made} claim statements in 2 s; fast webhook's delivery: ${JSON.stringify(await deliveries(fastId))}`;
      expect(fast.received.length, `the other webhook's delivery reached its receiver; ${state}`).toBe(1);
      expect(made, 'claim statements in 2 s with one delivery to send').toBeLessThan(10);
    } finally {
      hung.open();
      await dispatcher.stop();
      await hung.close();
      await fast.close();
    }
  }, 30_000);
});
