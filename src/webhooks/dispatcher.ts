import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Db } from '../db/db.ts';
import { guardPolicy, type Lookup, systemLookup } from './address-guard.ts';
import { type AttemptCounter, createAttempts } from './attempts.ts';
import type { EventOutbox } from './events.ts';
import { type ClaimedDelivery, claimDueDeliveries, findWebhookTargets, releaseDeliveries, type WebhookTarget } from './delivery-queries.ts';
import { failureFields } from '../http/unavailable.ts';
import { HANDED_PER_SLOT, type Held, slotShares, waitingRoom } from './shares.ts';

export type { AttemptCounter } from './attempts.ts';
export { HANDED_PER_SLOT } from './shares.ts';

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
   * UNRECORDED_PER_SLOT in attempts.ts).
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
  /** The slots each webhook's attempts hold, against its share (SLOT_SHARE_PER_WEBHOOK). */
  const shares = slotShares(concurrency);

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
  /**
   * The webhooks the last claim left out (at their share): their deliveries may wait in the
   * table, so the first of their attempts to end claims again, unless deliveries already wait
   * here (which it begins instead).
   */
  let skippedLast = new Set<number>();
  /** Slots taken: attempts under way, and answered ones waiting for their record when too many wait. */
  let busy = 0;
  /** Every attempt not yet finished (sent and recorded): what stop() waits for. */
  const attempts = new Set<Promise<void>>();
  /**
   * Deliveries we hold the lease for (handed over, or claimed beyond the free slots), waiting
   * for a slot: one webhook's fill at most the room of its share of the slots.
   */
  const handed = waitingRoom(maxHanded, shares.perWebhook * HANDED_PER_SLOT);
  /** Whether a waiting delivery could begin now (its webhook below its share): then it goes first. */
  const beginnableWaiting = () => [...handed.webhooks()].some(shares.hasRoom);
  let refilling = false;
  /** Deliveries being given back to the table: stop() waits for them. */
  const releases = new Set<Promise<void>>();
  const attempter = createAttempts({
    db, config, logger, policy, lookup, concurrency, metrics: options.metrics, onRetryDue: () => void pump(),
  });

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
        const skipped = shares.full();
        skippedLast = new Set(skipped);
        const claimed = await claimDueDeliveries(db, free, leaseMs, skipped);
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
    const webhookId = delivery.webhook_id;
    shares.take(webhookId);
    let freed = false;
    const free = () => {
      if (freed) return;
      freed = true;
      busy--;
      const left = shares.release(webhookId);
      if (stopped) return;
      // a pump begins waiting ones first (refill), then claims for the slots they leave: those
      // waiting may all be for a webhook at its share, with others' due in the table, and a
      // webhook the last claim left out may have some there
      if (backlog || (left === shares.perWebhook - 1 && skippedLast.delete(webhookId))) void pump();
      else if (handed.length > 0) void refill();
    };
    const running = attempter.make(delivery, free).finally(() => {
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
      const id = delivery.webhook_id;
      if (late || stopped) surplus.push(delivery);
      // at once when a slot and its webhook's share are free and nothing that could begin
      // waits before it; one for a webhook at its share waits, as one for a full dispatcher
      // does, in that webhook's part of the room, so it cannot crowd out the others'
      else if (busy < concurrency && shares.hasRoom(id) && !beginnableWaiting()) begin(delivery);
      else if (handed.admits(id)) handed.put([{ delivery, startBy }]);
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
   * has its deliveries closed, one deleted gets nothing, a new URL or secret applies (docs/webhooks.md,
   * "PATCH /api/webhooks/:id"). One whose lease is too near its end is given back.
   */
  async function refill(): Promise<void> {
    if (refilling) return;
    refilling = true;
    try {
      while (handed.length > 0 && busy < concurrency && !stopped) {
        // in order, passing over (and keeping in their place) those of a webhook at its share
        const { batch, late } = handed.takeBeginnable(concurrency - busy, performance.now(), shares.left);
        giveBack(late);
        // none can begin now: those left wait for a slot of their webhook's own (its attempts' end refills)
        if (batch.length === 0) break;
        busy += batch.length; // their slots, while their webhooks are read
        let targets: Map<number, WebhookTarget>;
        try {
          targets = new Map((await findWebhookTargets(db, batch.map((h) => h.delivery.webhook_id))).map((w) => [w.id, w]));
        } catch (err) {
          // they wait on; the next wake, poll or finished attempt tries again
          handed.put(batch, true);
          if (!stopped) logger.warn(failureFields(err), 'webhook dispatcher could not read the webhooks of waiting deliveries');
          break;
        } finally {
          busy -= batch.length;
        }
        if (stopped) {
          handed.put(batch, true); // stop() gives them back
          break;
        }
        const skipped: ClaimedDelivery[] = [];
        const waitOn: Held[] = [];
        const at = performance.now();
        for (const held of batch) {
          const { delivery, startBy } = held;
          const target = targets.get(delivery.webhook_id);
          if (!target) continue; // deleted, its deliveries with it
          // a webhook turned off: giving its delivery back closes it as failed
          if (!target.active || at > startBy) skipped.push(delivery);
          // its webhook reached its share while the targets were read (a claim began some)
          else if (!shares.hasRoom(delivery.webhook_id)) waitOn.push(held);
          else begin({ ...delivery, url: target.url, secret: target.secret });
        }
        handed.put(waitOn, true);
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
      attempter.stop();
      // In-flight attempts finish and are recorded; nothing new is claimed.
      while (attempts.size > 0 || pumping || refilling) {
        await Promise.allSettled([...attempts]);
        if (pumping || refilling) await new Promise((r) => setTimeout(r, 5));
      }
      // Held but not begun: give them back, so they go out at once after a restart (or from
      // another instance) instead of when their lease would have run out.
      giveBack(handed.takeAll().map((h) => h.delivery));
      await Promise.allSettled([...releases]);
    },
  };
}
