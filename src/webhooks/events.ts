import { afterCommitOf, type Queryable } from '../db/db.ts';
import { type WritePart, writeTogether } from '../db/statement.ts';
import { deliveryRows, type EventSource } from './event-queries.ts';
import type { ClaimedDelivery } from './delivery-queries.ts';

/** The seven event types of the webhook contract (docs/webhooks.md). */
export const EVENT_TYPES = [
  'user.login',
  'user.logout',
  'user.login_failed',
  'user.locked',
  'user.2fa_enabled',
  'token.expired',
  'client.registered',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** A list of events as one comparable value: the same events in any order or repeated compare equal. */
export function eventSet(events: readonly string[]): string {
  return [...new Set(events)].sort().join(',');
}

/** One event's payload (its `data`). */
export type EventData = Record<string, unknown>;

/**
 * What a use case sees of the webhook pipeline: it records events inside its transaction and
 * nothing more. An event exists exactly when the change that caused it was committed; what
 * happens after the commit (the dispatcher woken, or the deliveries handed to it) is run by
 * the unit of work (src/db/unit-of-work.ts), never by the use case.
 */
export interface EventRecorder {
  /**
   * Records events of one type in `tx`: one delivery row per active webhook subscribed to
   * the event. They go out once `tx` commits, never when it rolls back.
   */
  record(tx: Queryable, event: EventType, data: EventData | ReadonlyArray<EventData>): Promise<void>;
  /**
   * The same, as a part of one statement written with others (src/db/statement.ts): for a
   * hot path that writes its rows and its events in one round trip. The data may be a query
   * of that statement (EventSource), for a statement that reads what the events say.
   */
  part(event: EventType, data: EventSource): WritePart | null;
  /**
   * Says that `tx` wrote deliveries by other means (a database trigger, a delivery queued
   * again): they too go out once it commits.
   */
  written(tx: Queryable): void;
}

/**
 * The outbox of one process: the recorder the use cases get, and the side the dispatcher of
 * this process (if any) listens on. With a dispatcher attached (onHandOff), events written as
 * a statement's part are written already leased to it and handed over after the commit: they
 * go out without a claim statement and without waiting. Otherwise the commit wakes it.
 */
export interface EventOutbox extends EventRecorder {
  /** Tells the dispatcher to look for due deliveries now. */
  wake(): void;
  /** The dispatcher registers here to be woken. */
  onWake(listener: () => void): () => void;
  /** The lease a dispatcher of this process takes deliveries with (onHandOff), or null when none does. */
  handOffLeaseMs(): number | null;
  /** Gives committed, leased deliveries to the dispatcher; with none attached, they go out when their lease ends. */
  handOff(deliveries: ClaimedDelivery[]): void;
  /** The dispatcher registers here to be handed deliveries leased for `leaseMs`. */
  onHandOff(leaseMs: number, listener: (deliveries: ClaimedDelivery[]) => void): () => void;
}

/** Creates the outbox of this process (src/deps.ts gives its recorder side to every use case). */
export function createOutbox(): EventOutbox {
  const listeners = new Set<() => void>();
  let taker: { leaseMs: number; take: (deliveries: ClaimedDelivery[]) => void } | null = null;
  // one function, so a transaction that records several events wakes the dispatcher once
  const wake = () => {
    for (const l of listeners) l();
  };
  const handOff = (deliveries: ClaimedDelivery[]) => {
    if (deliveries.length > 0) taker?.take(deliveries);
  };
  return {
    async record(tx, event, data) {
      const part = deliveryRows(event, Array.isArray(data) ? data : [data], { counted: true });
      if (!part) return;
      const [written] = await writeTogether<{ n: number }>(tx, [part]);
      // Only deliveries written wake the dispatcher: with no webhook subscribed to the event
      // (most sign-ins, often) a wake-up would cost it a claim statement that finds nothing.
      // The same `wake` registered by several events of a transaction runs once.
      if (written.n > 0) afterCommitOf(tx)(wake);
    },
    written: (tx) => afterCommitOf(tx)(wake),
    part(event, data) {
      const leaseMs = taker?.leaseMs;
      if (leaseMs === undefined) {
        const part = deliveryRows(event, data);
        return part && { ...part, committed: wake };
      }
      const part = deliveryRows(event, data, { leaseMs });
      return part && { ...part, committed: (rows) => handOff(rows as ClaimedDelivery[]) };
    },
    wake,
    onWake(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    handOffLeaseMs: () => taker?.leaseMs ?? null,
    handOff,
    onHandOff(leaseMs, take) {
      const mine = { leaseMs, take };
      taker = mine; // one dispatcher per process takes them
      return () => {
        if (taker === mine) taker = null;
      };
    },
  };
}
