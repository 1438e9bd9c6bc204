import type { ClaimedDelivery } from './delivery-queries.ts';

/*
 * How the dispatcher (src/webhooks/dispatcher.ts) shares its slots, and its room for
 * deliveries waiting in memory, between webhooks.
 */

/**
 * The share of the slots one webhook's attempts may hold at once. A receiver that hangs until
 * the timeout holds every slot it gets for the whole timeout: without a bound, one with a
 * backlog took all of them, and every other webhook's events waited behind it, timeout after
 * timeout (a review helper, 2026-11-27). Half leaves the others half the slots and a single
 * busy receiver enough for thousands of attempts a second on a near network. Its room for
 * deliveries waiting in memory is HANDED_PER_SLOT for each of its slots (waitingRoom).
 */
export const SLOT_SHARE_PER_WEBHOOK = 0.5;

/**
 * Deliveries waiting in memory for a slot, at most, per slot; the surplus is given back to
 * the table at once, where any instance's claim takes it. Without a bound, token issue
 * faster than sending filled memory, and deliveries waited here past their lease, when
 * another instance claimed and sent them too. 64 slots start several thousand attempts a
 * second on loopback (`npm run bench:webhooks`): 1,024 waiting is well under a
 * second's work there, and a slow receiver's surplus goes to the table.
 */
export const HANDED_PER_SLOT = 16;

/** The slots each webhook's attempts hold, of `concurrency`, against its share (at least one). */
export function slotShares(concurrency: number) {
  const perWebhook = Math.max(1, Math.floor(concurrency * SLOT_SHARE_PER_WEBHOOK));
  const held = countsByWebhook();
  const left = (id: number) => perWebhook - held.of(id);
  return {
    perWebhook,
    /** How many more slots webhook `id` may hold. */
    left,
    hasRoom: (id: number) => left(id) > 0,
    /** The webhooks holding their whole share: a claim leaves their deliveries in the table. */
    full: () => held.atLeast(perWebhook),
    take: (id: number) => held.add(id, 1),
    /** Gives a slot of webhook `id` back; how many it still holds. */
    release: (id: number) => held.add(id, -1),
  };
}

/** A count per webhook id, holding no entry for zero. */
function countsByWebhook() {
  const counts = new Map<number, number>();
  return {
    of: (id: number) => counts.get(id) ?? 0,
    /** Adds `by` (negative to take away); the new count. */
    add(id: number, by: number): number {
      const n = (counts.get(id) ?? 0) + by;
      if (n <= 0) counts.delete(id);
      else counts.set(id, n);
      return n;
    },
    /** The webhooks with a count of `n` or more. */
    atLeast: (n: number) => [...counts].filter(([, c]) => c >= n).map(([id]) => id),
    /** The webhooks with a count above zero. */
    ids: () => counts.keys(),
    clear: () => counts.clear(),
  };
}

/** A delivery we hold the lease for, waiting for a slot; begun no later than `startBy` (performance.now()). */
export interface Held {
  delivery: ClaimedDelivery;
  startBy: number;
}

/**
 * Deliveries waiting in memory for a slot, in order: at most `capacity`, of which one
 * webhook's at most `perWebhook`, so the deliveries of a webhook at its share of the slots
 * cannot crowd out the others' (a review helper, 2026-11-27).
 */
export function waitingRoom(capacity: number, perWebhook: number) {
  const items: Held[] = [];
  const counts = countsByWebhook();
  const put = (added: readonly Held[], front = false): void => {
    if (front) items.unshift(...added);
    else items.push(...added);
    for (const held of added) counts.add(held.delivery.webhook_id, 1);
  };
  const takeAll = (): Held[] => {
    counts.clear();
    return items.splice(0);
  };
  return {
    get length() {
      return items.length;
    },
    /** Whether one more delivery of webhook `id` may wait here. */
    admits: (id: number) => items.length < capacity && counts.of(id) < perWebhook,
    /** The webhooks some wait for. */
    webhooks: counts.ids,
    /** Puts deliveries at the back or (given back to the queue) at the front. */
    put,
    /** Takes every delivery out, in order. */
    takeAll,
    /**
     * Takes out, in order, up to `room` deliveries that may begin now (`slotsLeft(id)`: how
     * many more slots their webhook may hold, counting those taken here) and every one past
     * its time (`late`); the rest keep their places.
     */
    takeBeginnable(room: number, now: number, slotsLeft: (id: number) => number): { batch: Held[]; late: ClaimedDelivery[] } {
      const batch: Held[] = [];
      const late: ClaimedDelivery[] = [];
      const kept: Held[] = [];
      const planned = countsByWebhook();
      for (const held of takeAll()) {
        const id = held.delivery.webhook_id;
        if (now > held.startBy) late.push(held.delivery);
        else if (batch.length < room && planned.of(id) < slotsLeft(id)) {
          batch.push(held);
          planned.add(id, 1);
        } else kept.push(held);
      }
      put(kept);
      return { batch, late };
    },
  };
}
