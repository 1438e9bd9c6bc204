import type { Logger } from 'pino';
import type { Db } from '../db/db.ts';
import type { EventRecorder } from '../webhooks/events.ts';
import { markExpiredTokensNotified } from './expiry-queries.ts';
import { failureFields } from '../http/unavailable.ts';

/** Tokens handled per statement, so one sweep after a long outage stays a short transaction. */
const BATCH = 500;

/**
 * Marks every SSO token that expired unused as notified and enqueues one token.expired per
 * such token, in one transaction. The marking is a single UPDATE whose WHERE re-checks
 * `expiry_notified_at IS NULL` on the latest row version: when several instances sweep at
 * once, each token is taken by exactly one of them, and its event exists only if that
 * transaction commits. Returns how many tokens were handled. With `signal`, no batch begins
 * once it is aborted.
 */
export async function sweepExpiredTokens(db: Db, events: EventRecorder, signal?: AbortSignal): Promise<number> {
  let total = 0;
  // a stopping instance ends after the batch in progress: a backlog (after an outage) is the
  // next instance's, not a reason to outlast the stop's budget
  while (!signal?.aborted) {
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
 * Runs the sweep every `intervalMs`. `stop` waits for the batch in progress to commit (a
 * stopping instance leaves no token marked without its event; they are one transaction
 * anyway) and begins no other: what is left of a backlog is swept by the next instance.
 */
export function startExpirySweep(options: { db: Db; events: EventRecorder; logger: Logger; intervalMs: number }): { stop(): Promise<void> } {
  const { db, events, logger, intervalMs } = options;
  let running: Promise<void> | null = null;
  const stopping = new AbortController();
  const tick = () => {
    if (running) return;
    running = sweepExpiredTokens(db, events, stopping.signal)
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
      stopping.abort();
      await running;
    },
  };
}
