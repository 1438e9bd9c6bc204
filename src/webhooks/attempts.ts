import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { createWriteBatch } from '../db/batch.ts';
import type { Db } from '../db/db.ts';
import { failureFields } from '../http/unavailable.ts';
import type { GuardPolicy, Lookup } from './address-guard.ts';
import { hasRetriesLeft, retryDelayMs } from './backoff.ts';
import { type AttemptRecord, type ClaimedDelivery, recordAttempts } from './delivery-queries.ts';
import { disableWebhook, lockWebhook } from './queries.ts';
import { type AttemptOutcome, sendDelivery } from './sender.ts';

/** How long a finished attempt waits for others to be recorded with it. */
const RECORD_WAIT_MS = 10;

/**
 * Attempts answered but not yet recorded, at most, per slot: past that (a slow database), an
 * answered attempt keeps its slot until it is recorded, so the dispatcher slows down with
 * the database instead of holding ever more outcomes in memory.
 *
 * Why slots are freed before recording: recording waits RECORD_WAIT_MS for company and then
 * for its statement, together longer than a loopback attempt itself. When a slot was held
 * until then, 64 slots capped delivery near 3,500 a second on a quiet 2-core machine, and
 * lower when PostgreSQL was slow: below the rate token issue reached, and user.login
 * deliveries queued for seconds behind each other (`npm run bench:webhooks`).
 */
const UNRECORDED_PER_SLOT = 4;

/** Where the outcome of each attempt is counted. */
export interface AttemptCounter {
  inc(labels: { outcome: 'succeeded' | 'retry' | 'failed' }): void;
}

export interface AttemptOptions {
  db: Db;
  config: Pick<Config, 'WEBHOOK_TIMEOUT_MS' | 'WEBHOOK_BACKOFF_MS'>;
  logger: Logger;
  policy: GuardPolicy;
  lookup: Lookup;
  /** The dispatcher's slots: a bound on answered attempts waiting for their record follows from it. */
  concurrency: number;
  metrics?: { webhookDeliveries: AttemptCounter };
  /** Called when a retry falls due, to claim it then rather than at the next poll. */
  onRetryDue(): void;
}

/**
 * The dispatcher's attempts: one delivery sent, then its outcome recorded (attempts that end
 * together in one statement), counted, logged, and its retry woken when due.
 */
export function createAttempts(options: AttemptOptions) {
  const { db, config, logger, policy, lookup } = options;
  /** Attempts answered and waiting for their record. */
  let unrecorded = 0;
  const maxUnrecorded = options.concurrency * UNRECORDED_PER_SLOT;
  let stopped = false;
  const retryTimers = new Set<NodeJS.Timeout>();
  // Attempts that finish within a few milliseconds of each other are recorded in one
  // statement: the receiver already has its event, and at a steady load one statement per
  // attempt cost PostgreSQL more than the attempts did.
  const recordTogether = createWriteBatch<AttemptRecord>((records) => recordAttempts(db, records), { waitMs: RECORD_WAIT_MS });

  /** The record of an attempt; `gone`: a 410 that disables its webhook (no retry). */
  function recordOf(delivery: ClaimedDelivery, outcome: AttemptOutcome, gone: boolean): AttemptRecord {
    const retry = !outcome.ok && !gone && hasRetriesLeft(delivery.attempts);
    return {
      id: delivery.id,
      attempt: delivery.attempts,
      status: outcome.ok ? 'succeeded' : retry ? 'pending' : 'failed',
      statusCode: outcome.statusCode,
      error: outcome.error ?? (outcome.ok ? null : `HTTP ${outcome.statusCode}`),
      retryInMs: retry ? retryDelayMs(delivery.attempts, config.WEBHOOK_BACKOFF_MS) : null,
      durationMs: outcome.durationMs,
    };
  }

  async function recordOutcome(delivery: ClaimedDelivery, outcome: AttemptOutcome): Promise<void> {
    let gone = outcome.statusCode === 410;
    let record = recordOf(delivery, outcome, gone);
    try {
      if (gone) {
        await db.transaction(async (tx) => {
          // the webhook first: events being written for it are waited for and closed too
          const hook = await lockWebhook(tx, delivery.webhook_id, true);
          if (hook && hook.url !== delivery.url) {
            // the 410 is about the URL it came from: a webhook moved elsewhere meanwhile stays
            // on, and this is a failed attempt like any other, retried at the new URL
            gone = false;
            record = recordOf(delivery, outcome, false);
            await recordAttempts(tx, [record]);
            return;
          }
          await recordAttempts(tx, [record]);
          await disableWebhook(tx, delivery.webhook_id, 'receiver answered 410 Gone');
        });
      } else {
        await recordTogether(record);
      }
    } catch (err) {
      // Unrecorded, the lease runs out and the attempt is made again: at least once.
      const fields = failureFields(err);
      // an outage is expected and survived (the attempt is made again); anything else is a bug
      if ('outage' in fields) logger.warn({ ...fields, delivery: delivery.id }, 'could not record a webhook attempt');
      else logger.error({ ...fields, delivery: delivery.id }, 'could not record a webhook attempt');
      return;
    }
    const { retryInMs, error } = record;
    options.metrics?.webhookDeliveries.inc({ outcome: outcome.ok ? 'succeeded' : retryInMs !== null ? 'retry' : 'failed' });
    const log = { delivery: delivery.id, webhook: delivery.webhook_id, event: delivery.event, attempt: delivery.attempts };
    if (outcome.ok) logger.debug({ ...log, status: outcome.statusCode, ms: outcome.durationMs }, 'webhook delivered');
    else logger.warn({ ...log, status: outcome.statusCode, error, retryInMs }, gone ? 'webhook disabled by 410' : 'webhook attempt failed');
    if (retryInMs !== null && !stopped) {
      // Wake up exactly when the retry is due rather than at the next poll, so the
      // configured backoff is what the receiver sees.
      const timer = setTimeout(() => {
        retryTimers.delete(timer);
        options.onRetryDue();
      }, retryInMs + 5);
      timer.unref();
      retryTimers.add(timer);
    }
  }

  return {
    /** Sends, then records the outcome; `answered` is called once the receiver's answer is in, unless too many wait to be recorded. */
    async make(delivery: ClaimedDelivery, answered: () => void): Promise<void> {
      const outcome = await sendDelivery(delivery, { timeoutMs: config.WEBHOOK_TIMEOUT_MS, policy, lookup });
      unrecorded++;
      // A 410 keeps its slot until the webhook is disabled: the deliveries waiting behind it
      // would otherwise read it still active and go out.
      if (unrecorded <= maxUnrecorded && outcome.statusCode !== 410) answered();
      try {
        await recordOutcome(delivery, outcome);
      } finally {
        unrecorded--;
      }
    },

    /** No more retry wake-ups (attempts under way are still recorded). */
    stop(): void {
      stopped = true;
      for (const t of retryTimers) clearTimeout(t);
      retryTimers.clear();
    },
  };
}
