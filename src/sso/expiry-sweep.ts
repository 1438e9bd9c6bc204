import type { Logger } from 'pino';
import type { Db } from '../db/db.ts';
import type { EventRecorder } from '../webhooks/events.ts';
import { markExpiredTokensNotified } from './queries.ts';
import { failureFields } from '../http/unavailable.ts';

/** Tokens handled per statement, so one sweep after a long outage stays a short transaction. */
const BATCH = 500;

/**
 * Marks every SSO token that expired unused as notified and enqueues one token.expired per
 * such token, in one transaction. The marking is a single UPDATE whose WHERE re-checks
 * `expiry_notified_at IS NULL` on the latest row version: when several instances sweep at
 * once, each token is taken by exactly one of them, and its event exists only if that
 * transaction commits. Returns how many tokens were handled.
 */
export async function sweepExpiredTokens(db: Db, events: EventRecorder): Promise<number> {
  let total = 0;
  for (;;) {
    const handled = await db.transaction(async (tx) => {
      const expired = await markExpiredTokensNotified(tx, BATCH);
      await events.record(
        tx,
        'token.expired',
        expired.map((t) => ({
          user_id: t.user_id,
          token_id: t.jti,
          client_system: t.client_id,
          expired_at: new Date(t.expires_at).toISOString(),
        })),
      );
      return expired.length;
    });
    total += handled;
    if (handled < BATCH) break;
  }
  return total;
}

/**
 * Runs the sweep every `intervalMs`. `stop` waits for a sweep in progress to commit, so a
 * stopping instance leaves no token marked without its event (they are one transaction anyway).
 */
export function startExpirySweep(options: { db: Db; events: EventRecorder; logger: Logger; intervalMs: number }): { stop(): Promise<void> } {
  const { db, events, logger, intervalMs } = options;
  let running: Promise<void> | null = null;
  const tick = () => {
    if (running) return;
    running = sweepExpiredTokens(db, events)
      .then((n) => {
        if (n > 0) logger.debug({ tokens: n }, 'token.expired events enqueued');
      })
      .catch((err) => logger.warn(failureFields(err), 'token expiry sweep failed; retrying next interval'))
      .finally(() => {
        running = null;
      });
  };
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
