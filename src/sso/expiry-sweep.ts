import type { Logger } from 'pino';
import type { Db } from '../db/db.ts';
import type { EventOutbox } from '../webhooks/events.ts';
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
export async function sweepExpiredTokens(db: Db, outbox: EventOutbox): Promise<number> {
  let total = 0;
  for (;;) {
    const handled = await db.transaction(async (tx) => {
      const r = await tx.query<{ jti: string; user_id: number; client_id: string; expires_at: Date }>(
        `UPDATE sso_tokens t SET expiry_notified_at = now()
         WHERE t.jti IN (
           SELECT jti FROM sso_tokens
           WHERE expiry_notified_at IS NULL AND used_at IS NULL AND invalidated_at IS NULL AND expires_at <= now()
           ORDER BY expires_at LIMIT $1
           FOR UPDATE SKIP LOCKED)
         AND t.expiry_notified_at IS NULL
         RETURNING t.jti, t.user_id, t.client_id, t.expires_at`,
        [BATCH],
      );
      await outbox.enqueueMany(
        tx,
        'token.expired',
        r.rows.map((t) => ({
          user_id: t.user_id,
          token_id: t.jti,
          client_system: t.client_id,
          expired_at: new Date(t.expires_at).toISOString(),
        })),
      );
      return r.rows.length;
    });
    total += handled;
    if (handled < BATCH) break;
  }
  if (total > 0) outbox.wake();
  return total;
}

/**
 * Runs the sweep every `intervalMs`. `stop` waits for a sweep in progress to commit, so a
 * stopping instance leaves no token marked without its event (they are one transaction anyway).
 */
export function startExpirySweep(options: { db: Db; outbox: EventOutbox; logger: Logger; intervalMs: number }): { stop(): Promise<void> } {
  const { db, outbox, logger, intervalMs } = options;
  let running: Promise<void> | null = null;
  const tick = () => {
    if (running) return;
    running = sweepExpiredTokens(db, outbox)
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
