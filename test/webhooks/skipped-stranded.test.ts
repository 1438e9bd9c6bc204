import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { startDispatcher } from '../../src/webhooks/dispatcher.ts';
import { createOutbox } from '../../src/webhooks/events.ts';
import { createMigratedDatabase, TEST_ENV } from '../helpers/app.ts';
import { insertUserAndClient } from '../helpers/factories.ts';
import { dispatcherKit, NEVER } from './dispatcher-kit.ts';
import { eventually, sleep, startHeldReceiver } from './receiver.ts';

const patient = loadConfig({ ...TEST_ENV, WEBHOOK_TIMEOUT_MS: '10000', WEBHOOK_BACKOFF_MS: '100' });
const logger = pino({ level: 'silent' });

describe('a webhook left out by a claim, when another webhook at its share has deliveries waiting', () => {
  let t: Awaited<ReturnType<typeof createMigratedDatabase>>;
  beforeAll(async () => {
    t = await createMigratedDatabase();
    await insertUserAndClient(t.db, 'review');
  });
  afterAll(() => t.drop());

  const { issue, addWebhook, onlyWebhooks, deliveries } = dispatcherKit(() => t.db, 'review', patient);

  it('its deliveries left in the table are claimed once its attempts end', async () => {
    const a = await startHeldReceiver(2);
    const c = await startHeldReceiver(2);
    const [aId] = await onlyWebhooks([a.url]);
    await issue(createOutbox(), 5); // five for A in the table, unclaimed (no dispatcher in that process)
    await t.db.query("UPDATE webhooks SET events = '{user.logout}' WHERE id = $1", [aId]); // later tokens are for C only
    const outbox = createOutbox();
    // 4 slots, 2 per webhook: the start-up claim takes 4 of A (2 begin, 2 wait), the next leaves A out (1 stays in the table)
    const dispatcher = startDispatcher({ db: t.db, config: patient, logger, outbox, pollMs: NEVER, concurrency: 4 });
    try {
      await eventually(async () => a.received.length === 2, 10_000, 'A holds its share');
      await addWebhook(c.url);
      await issue(outbox, 3); // C: 2 begin (held), 1 waits in memory
      await eventually(async () => c.received.length === 2, 10_000, 'C holds its share');
      a.open(); // A's attempts end: its two waiting ones go, then the one in the table should be claimed
      await sleep(2000);
      expect(a.received.length, `A's deliveries sent (5 due, 2 free slots, A below its share); rows: ${JSON.stringify(await deliveries(aId))}`).toBe(5);
    } finally {
      a.open();
      c.open();
      await dispatcher.stop();
      await a.close();
      await c.close();
    }
  }, 30_000);
});
