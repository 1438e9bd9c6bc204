import type { Queryable } from '../db/db.ts';
import { placeholders, type WritePart, writeTogether } from '../db/statement.ts';
import { CLAIMED_DELIVERY_COLUMNS, type ClaimedDelivery } from './queries.ts';

/** The seven event types of SPEC.md section 6. */
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

/**
 * The outbox: `enqueue` writes one delivery row per active webhook subscribed to the event,
 * inside the caller's transaction, so an event exists exactly when the change that caused
 * it was committed. `wake` tells the dispatcher (if one runs in this process) to send now.
 */
export interface EventOutbox {
  enqueue(tx: Queryable, event: EventType, data: Record<string, unknown>): Promise<void>;
  /** The same for many events of one type in one statement (e.g. a sweep's batch). */
  enqueueMany(tx: Queryable, event: EventType, data: Array<Record<string, unknown>>): Promise<void>;
  /** Called after the transaction that enqueued has committed. */
  wake(): void;
  /** The dispatcher registers here to be woken. */
  onWake(listener: () => void): () => void;
  /**
   * The lease a dispatcher of this process takes deliveries with (onHandOff), or null when
   * none does. A hot path that knows it can write its events already leased
   * (eventDeliveries with a lease) and hand them over after commit: no claim statement, no wait.
   */
  handOffLeaseMs(): number | null;
  /** Gives committed, leased deliveries to the dispatcher; with none attached, they go out when their lease ends. */
  handOff(deliveries: ClaimedDelivery[]): void;
  /** The dispatcher registers here to be handed deliveries leased for `leaseMs`. */
  onHandOff(leaseMs: number, listener: (deliveries: ClaimedDelivery[]) => void): () => void;
}

/**
 * The delivery rows of events of one type (one per event and active webhook subscribed to
 * it, in order), as a part of a larger statement: the events' own transaction or statement.
 *
 * With `lease`, the rows are written already claimed for their first attempt and leased to
 * the dispatcher they will be handed to (EventOutbox.handOff), and the statement answers
 * them as that dispatcher needs them (ClaimedDelivery).
 */
export function eventDeliveries(event: EventType, data: ReadonlyArray<Record<string, unknown>>, lease?: { leaseMs: number }): WritePart | null {
  if (data.length === 0) return null;
  const part: WritePart = {
    sql: (first) => {
      const [name, events, leaseMs] = placeholders(first, lease ? 3 : 2);
      const [columns, values] = lease
        ? [', attempts, locked_until', `, 1, now() + make_interval(secs => ${leaseMs}::double precision / 1000)`]
        : ['', ''];
      return `INSERT INTO webhook_deliveries (id, webhook_id, event, data${columns})
       SELECT gen_random_uuid(), w.id, ${name}::text, e.value${values}
       FROM jsonb_array_elements(${events}::jsonb) WITH ORDINALITY AS e(value, n)
       CROSS JOIN webhooks w WHERE w.active AND ${name}::text = ANY (w.events)
       ORDER BY e.n, w.id${lease ? '\n       RETURNING id, webhook_id, event, data, attempts' : ''}`;
    },
    values: lease ? [event, JSON.stringify(data), lease.leaseMs] : [event, JSON.stringify(data)],
  };
  if (lease) part.answer = (cte) => `${CLAIMED_DELIVERY_COLUMNS} FROM ${cte} d JOIN webhooks w ON w.id = d.webhook_id`;
  return part;
}

/** Creates the outbox used by every use case that emits events. */
export function createOutbox(): EventOutbox {
  const listeners = new Set<() => void>();
  let taker: { leaseMs: number; take: (deliveries: ClaimedDelivery[]) => void } | null = null;
  const enqueueMany: EventOutbox['enqueueMany'] = async (tx, event, data) => {
    await writeTogether(tx, [eventDeliveries(event, data)]);
  };
  return {
    enqueue: (tx, event, data) => enqueueMany(tx, event, [data]),
    enqueueMany,
    wake() {
      for (const l of listeners) l();
    },
    onWake(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    handOffLeaseMs: () => taker?.leaseMs ?? null,
    handOff(deliveries) {
      if (deliveries.length > 0) taker?.take(deliveries);
    },
    onHandOff(leaseMs, take) {
      const mine = { leaseMs, take };
      taker = mine; // one dispatcher per process takes them
      return () => {
        if (taker === mine) taker = null;
      };
    },
  };
}
