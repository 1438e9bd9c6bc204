import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/db.ts';
import { sweepExpiredTokens } from '../../src/sso/expiry-sweep.ts';
import { createOutbox, type EventRecorder } from '../../src/webhooks/events.ts';
import { createMigratedDatabase, startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { insertUserAndClient } from '../helpers/factories.ts';
import { eventually } from '../webhooks/receiver.ts';

/** A backlog of tokens that expired unused (after an outage, say). */
async function backlog(db: Db, tokens: number): Promise<void> {
  const { userId, clientId } = await insertUserAndClient(db, unique('sweep'));
  await db.query(
    `INSERT INTO sso_tokens (jti, user_id, client_id, username, ip_address, issued_at, expires_at)
     SELECT gen_random_uuid(), $1, $2, 'u', '127.0.0.1', now() - interval '2 hours', now() - interval '1 hour' - g * interval '1 ms'
     FROM generate_series(1, $3::int) g`,
    [userId, clientId, tokens],
  );
}

const unswept = async (db: Db) =>
  (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM sso_tokens WHERE expiry_notified_at IS NULL')).rows[0].n;

/**
 * A stopping instance ends the token expiry sweep after the batch in progress, as the pruner
 * does, instead of sweeping a whole backlog first (at some 36,000 tokens a second, a backlog of
 * a million outlasted the 25 s a stop is given). Found by a review helper.
 */
describe('token expiry sweep at stop', () => {
  it('begins no batch once its signal is aborted', async () => {
    const t = await createMigratedDatabase();
    try {
      await backlog(t.db, 1_200);
      const stopping = new AbortController();
      const outbox = createOutbox();
      // the first batch's events are recorded in its transaction; the stop comes meanwhile
      const events: EventRecorder = { ...outbox, record: async (tx, event, data) => { stopping.abort(); await outbox.record(tx, event, data); } };
      expect(await sweepExpiredTokens(t.db, events, stopping.signal)).toBe(500);
      expect(await unswept(t.db)).toBe(700);
      expect(await sweepExpiredTokens(t.db, outbox), 'the rest is the next sweep\'s').toBe(700);
    } finally {
      await t.drop();
    }
  });

  // PostgreSQL: the embedded database's one connection serves the sweep's batches back to back,
  // so nothing sees the sweep under way there
  describe.runIf(onPostgres)('of a running instance', () => {
    let app: TestApp;
    const TOKENS = 150_000;
    beforeAll(async () => {
      app = await startTestApp({ TOKEN_SWEEP_INTERVAL_MS: '100', PRUNE_INTERVAL: '0' });
    });
    afterAll(() => app?.close());

    it('ends after the batch in progress instead of sweeping the whole backlog first', async () => {
      await backlog(app.db, TOKENS);
      await eventually(async () => (await unswept(app.db)) < TOKENS, 10_000, 'the sweep to start');
      await app.stop();
      // the stop waited for one short transaction (500 tokens), not for the backlog
      expect(await unswept(app.db)).toBeGreaterThan(0);
      const marked = (await app.db.query<{ n: number }>('SELECT count(*)::int AS n FROM sso_tokens WHERE expiry_notified_at IS NOT NULL')).rows[0].n;
      expect(marked % 500, 'whole batches, each committed with its events').toBe(0);
    }, 120_000);
  });
});
