import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { createBatchLoader } from '../db/batch.ts';
import type { Db } from '../db/db.ts';
import { guardPolicy, type Lookup, systemLookup } from './address-guard.ts';
import { hasRetriesLeft, retryDelayMs } from './backoff.ts';
import type { EventOutbox } from './events.ts';
import {
  type AttemptRecord, type ClaimedDelivery, claimDueDeliveries, disableWebhook, findWebhookTargets, recordAttempts, releaseDeliveries, type WebhookTarget,
} from './queries.ts';
import { type AttemptOutcome, sendDelivery } from './sender.ts';
import { failureFields } from '../http/unavailable.ts';

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
 * deliveries queued for seconds behind each other (docs/performance.md, "Webhook latency").
 */
const UNRECORDED_PER_SLOT = 4;

/**
 * Deliveries waiting in memory for a slot, at most, per slot; the surplus is given back to
 * the table at once, where any instance's claim takes it. Without a bound, token issue
 * faster than sending filled memory, and deliveries waited here past their lease, when
 * another instance claimed and sent them too. 64 slots start several thousand attempts a
 * second on loopback (docs/performance.md, "Webhook latency"): 1,024 waiting is well under a
 * second's work there, and a slow receiver's surplus goes to the table.
 */
export const HANDED_PER_SLOT = 16;

/** A delivery we hold the lease for, waiting for a slot; begun no later than `startBy` (performance.now()). */
interface Held {
  delivery: ClaimedDelivery;
  startBy: number;
}

/** A background worker of the service: `stop` lets the current attempts finish. */
export interface Worker {
  stop(): Promise<void>;
}

/**
 * How long a claimed (or handed-over) delivery stays with one dispatcher: longer than any
 * attempt (bounded by the timeout) plus recording it. If that dispatcher dies, another one
 * (or this one, restarted) claims the delivery again once the lease has run out.
 */
export function deliveryLeaseMs(config: Pick<Config, 'WEBHOOK_TIMEOUT_MS'>): number {
  return config.WEBHOOK_TIMEOUT_MS * 2 + 10_000;
}

/** Where the outcome of each attempt is counted. */
export interface AttemptCounter {
  inc(labels: { outcome: 'succeeded' | 'retry' | 'failed' }): void;
}

export interface DispatcherOptions {
  db: Db;
  config: Pick<Config, 'NODE_ENV' | 'WEBHOOK_ALLOW_PRIVATE' | 'WEBHOOK_TIMEOUT_MS' | 'WEBHOOK_BACKOFF_MS'>;
  logger: Logger;
  outbox: EventOutbox;
  /** How often due deliveries are looked for when nothing woke us (other instances' events, retries after a restart). */
  pollMs?: number;
  /**
   * Attempts in flight at once, so one slow receiver does not hold up the others. A slot is
   * held while the request is on its way; recording its outcome does not hold one (see
   * UNRECORDED_PER_SLOT).
   */
  concurrency?: number;
  lookup?: Lookup;
  /** How long deliveries are leased to it: deliveryLeaseMs(config), unless a test shortens it. */
  leaseMs?: number;
  /** Counts attempts by outcome for /metrics (the Prometheus counter, or a thread's relay of it). */
  metrics?: { webhookDeliveries: AttemptCounter };
}

/**
 * Starts the webhook dispatcher. It sends as soon as the outbox is woken after a commit, and
 * also polls, so deliveries written by other instances or left pending by a restart go out.
 * Every attempt is claimed atomically in the database (see claimDueDeliveries): several
 * instances never make the same attempt twice.
 */
export function startDispatcher(options: DispatcherOptions): Worker {
  const { db, config, logger, outbox } = options;
  const pollMs = options.pollMs ?? 500;
  const concurrency = options.concurrency ?? 64;
  const lookup = options.lookup ?? systemLookup;
  const policy = guardPolicy(config);
  const leaseMs = options.leaseMs ?? deliveryLeaseMs(config);
  /**
   * How long a delivery may wait in memory after its lease was taken: its attempt takes up to
   * the timeout, and half of what the lease leaves beyond that is kept for recording the
   * outcome and for the hand-off's own delay (it reaches us after the statement that leased
   * it). Past that it is given back: once its lease has run out in the database another
   * instance claims it, and both would send it.
   */
  const maxWaitMs = (leaseMs - config.WEBHOOK_TIMEOUT_MS) / 2;
  const maxHanded = concurrency * HANDED_PER_SLOT;

  let stopped = false;
  let pumping = false;
  let again = false;
  /**
   * The table may hold due deliveries we had no free slot for: the last claim filled every
   * slot, or a wake-up or poll came while all were taken. Only then does a finished attempt
   * claim again; otherwise (deliveries handed over one by one) it would cost a statement per
   * attempt that finds nothing.
   */
  let backlog = false;
  /** Slots taken: attempts under way, and answered ones waiting for their record when too many wait. */
  let busy = 0;
  /** Every attempt not yet finished (sent and recorded): what stop() waits for. */
  const attempts = new Set<Promise<void>>();
  /** Attempts answered and waiting for their record. */
  let unrecorded = 0;
  const maxUnrecorded = concurrency * UNRECORDED_PER_SLOT;
  /** Deliveries we hold the lease for (handed over, or claimed beyond the free slots), waiting for a slot. */
  const handed: Held[] = [];
  let refilling = false;
  /** Deliveries being given back to the table: stop() waits for them. */
  const releases = new Set<Promise<void>>();
  // Attempts that finish within a few milliseconds of each other are recorded in one
  // statement: the receiver already has its event, and at a steady load one statement per
  // attempt cost PostgreSQL more than the attempts did.
  const recorder = createBatchLoader<AttemptRecord, true>(async (records) => {
    await recordAttempts(db, records);
    return records.map(() => true as const);
  }, { waitMs: RECORD_WAIT_MS });
  const retryTimers = new Set<NodeJS.Timeout>();

  async function pump(): Promise<void> {
    if (stopped) return;
    if (pumping) {
      again = true;
      return;
    }
    pumping = true;
    try {
      for (;;) {
        again = false;
        void refill(); // waiting deliveries first: it takes their slots before its first await
        const free = concurrency - busy;
        if (stopped) break;
        if (free <= 0) {
          backlog = true;
          break;
        }
        // taken before the statement: the lease it writes cannot have begun earlier
        const startBy = performance.now() + maxWaitMs;
        const claimed = await claimDueDeliveries(db, free, leaseMs);
        backlog = claimed.length === free;
        // slots taken by hand-offs during the claim: the rest wait their turn
        receive(claimed, startBy);
        if (claimed.length < free && !again) break;
      }
    } catch (err) {
      // The database may be briefly unavailable; the next wake or poll tries again.
      if (!stopped) logger.warn(failureFields(err), 'webhook dispatcher could not claim deliveries');
    } finally {
      pumping = false;
    }
  }

  /**
   * Makes the attempt we hold the lease for. An answered attempt frees its slot for the next
   * (one handed over and waiting, or, when there may be a backlog, one claimed from the
   * table) while its outcome is recorded.
   */
  function begin(delivery: ClaimedDelivery): void {
    busy++;
    let freed = false;
    const free = () => {
      if (freed) return;
      freed = true;
      busy--;
      if (stopped) return;
      if (handed.length > 0) void refill();
      else if (backlog) void pump();
    };
    const running = attempt(delivery, free).finally(() => {
      attempts.delete(running);
      free();
    });
    attempts.add(running);
  }

  /**
   * Deliveries written already leased to this dispatcher (see EventOutbox.handOff): attempted
   * at once, with no claim statement and no wait for a wake-up. Past the concurrency limit
   * they wait their turn, ahead of anything claimed from the table.
   */
  function take(deliveries: readonly ClaimedDelivery[]): void {
    if (stopped) return; // their leases run out and they are claimed again
    receive(deliveries, performance.now() + maxWaitMs);
  }

  /**
   * Deliveries we now hold the lease for, to be begun by `startBy`: each begins at once when
   * a slot is free and none waits before it, otherwise waits its turn; past the bound on
   * waiting ones (or already too late to begin), it is given back to the table.
   */
  function receive(deliveries: readonly ClaimedDelivery[], startBy: number): void {
    const surplus: ClaimedDelivery[] = [];
    const late = performance.now() > startBy;
    for (const delivery of deliveries) {
      if (late || stopped) surplus.push(delivery);
      else if (busy < concurrency && handed.length === 0) begin(delivery);
      else if (handed.length < maxHanded) handed.push({ delivery, startBy });
      else surplus.push(delivery);
    }
    giveBack(surplus);
    void refill();
  }

  /**
   * Begins waiting deliveries as slots are free. They may have waited long enough for an
   * administrator to change their webhook, and a waiting delivery is leased, so turning the
   * webhook off could not close it (disableWebhook): url, secret and active flag are read
   * again first, in one statement for all that begin together. A webhook turned off meanwhile
   * has its deliveries closed, one deleted gets nothing, a new URL or secret applies (README,
   * "PATCH /api/webhooks/:id"). One whose lease is too near its end is given back.
   */
  async function refill(): Promise<void> {
    if (refilling) return;
    refilling = true;
    try {
      while (handed.length > 0 && busy < concurrency && !stopped) {
        const batch: Held[] = [];
        const late: ClaimedDelivery[] = [];
        const now = performance.now();
        while (handed.length > 0 && batch.length < concurrency - busy) {
          const held = handed.shift()!;
          if (now > held.startBy) late.push(held.delivery);
          else batch.push(held);
        }
        giveBack(late);
        if (batch.length === 0) continue;
        busy += batch.length; // their slots, while their webhooks are read
        let targets: Map<number, WebhookTarget>;
        try {
          targets = new Map((await findWebhookTargets(db, batch.map((h) => h.delivery.webhook_id))).map((w) => [w.id, w]));
        } catch (err) {
          // they wait on; the next wake, poll or finished attempt tries again
          handed.unshift(...batch);
          if (!stopped) logger.warn(failureFields(err), 'webhook dispatcher could not read the webhooks of waiting deliveries');
          break;
        } finally {
          busy -= batch.length;
        }
        if (stopped) {
          handed.unshift(...batch); // stop() gives them back
          break;
        }
        const skipped: ClaimedDelivery[] = [];
        const at = performance.now();
        for (const { delivery, startBy } of batch) {
          const target = targets.get(delivery.webhook_id);
          if (!target) continue; // deleted, its deliveries with it
          // a webhook turned off: giving its delivery back closes it as failed
          if (!target.active || at > startBy) skipped.push(delivery);
          else begin({ ...delivery, url: target.url, secret: target.secret });
        }
        giveBack(skipped);
      }
    } finally {
      refilling = false;
    }
  }

  /**
   * Gives deliveries we hold but will not attempt back to the table (releaseDeliveries): any
   * claimer takes them at once, this dispatcher too as its slots free up; those of a webhook
   * turned off are closed there. Should that fail, they are claimed when their lease runs out.
   */
  function giveBack(deliveries: readonly ClaimedDelivery[]): void {
    if (deliveries.length === 0) return;
    const releasing = releaseDeliveries(db, deliveries.map((d) => ({ id: d.id, attempt: d.attempts })))
      .then(() => {
        backlog = true;
        void pump();
      }, (err) => {
        logger.warn({ ...failureFields(err), deliveries: deliveries.length }, 'could not give back webhook deliveries; they go out when their lease ends');
      })
      .finally(() => releases.delete(releasing));
    releases.add(releasing);
  }

  /** Sends, then records the outcome; `answered` is called once the receiver's answer is in, unless too many wait to be recorded. */
  async function attempt(delivery: ClaimedDelivery, answered: () => void): Promise<void> {
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
  }

  async function recordOutcome(delivery: ClaimedDelivery, outcome: AttemptOutcome): Promise<void> {
    const gone = outcome.statusCode === 410;
    const retry = !outcome.ok && !gone && hasRetriesLeft(delivery.attempts);
    const retryInMs = retry ? retryDelayMs(delivery.attempts, config.WEBHOOK_BACKOFF_MS) : null;
    const error = outcome.error ?? (outcome.ok ? null : `HTTP ${outcome.statusCode}`);
    const record: AttemptRecord = {
      id: delivery.id,
      attempt: delivery.attempts,
      status: outcome.ok ? 'succeeded' : retry ? 'pending' : 'failed',
      statusCode: outcome.statusCode,
      error,
      retryInMs,
      durationMs: outcome.durationMs,
    };
    try {
      if (gone) {
        await db.transaction(async (tx) => {
          await recordAttempts(tx, [record]);
          await disableWebhook(tx, delivery.webhook_id, 'receiver answered 410 Gone');
        });
      } else {
        await recorder.load(record);
      }
    } catch (err) {
      // Unrecorded, the lease runs out and the attempt is made again: at least once.
      const fields = failureFields(err);
      // an outage is expected and survived (the attempt is made again); anything else is a bug
      if ('outage' in fields) logger.warn({ ...fields, delivery: delivery.id }, 'could not record a webhook attempt');
      else logger.error({ ...fields, delivery: delivery.id }, 'could not record a webhook attempt');
      return;
    }
    options.metrics?.webhookDeliveries.inc({ outcome: outcome.ok ? 'succeeded' : retry ? 'retry' : 'failed' });
    const log = { delivery: delivery.id, webhook: delivery.webhook_id, event: delivery.event, attempt: delivery.attempts };
    if (outcome.ok) logger.debug({ ...log, status: outcome.statusCode, ms: outcome.durationMs }, 'webhook delivered');
    else logger.warn({ ...log, status: outcome.statusCode, error, retryInMs }, gone ? 'webhook disabled by 410' : 'webhook attempt failed');
    if (retryInMs !== null && !stopped) {
      // Wake up exactly when the retry is due rather than at the next poll, so the
      // configured backoff is what the receiver sees.
      const timer = setTimeout(() => {
        retryTimers.delete(timer);
        void pump();
      }, retryInMs + 5);
      timer.unref();
      retryTimers.add(timer);
    }
  }

  const unsubscribe = outbox.onWake(() => void pump());
  const stopTaking = outbox.onHandOff(leaseMs, take);
  const poll = setInterval(() => void pump(), pollMs);
  poll.unref();
  void pump();

  return {
    async stop() {
      stopped = true;
      unsubscribe();
      stopTaking();
      clearInterval(poll);
      for (const t of retryTimers) clearTimeout(t);
      retryTimers.clear();
      // In-flight attempts finish and are recorded; nothing new is claimed.
      while (attempts.size > 0 || pumping || refilling) {
        await Promise.allSettled([...attempts]);
        if (pumping || refilling) await new Promise((r) => setTimeout(r, 5));
      }
      // Held but not begun: give them back, so they go out at once after a restart (or from
      // another instance) instead of when their lease would have run out.
      giveBack(handed.splice(0).map((h) => h.delivery));
      await Promise.allSettled([...releases]);
    },
  };
}
