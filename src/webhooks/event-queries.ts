import type { WritePart } from '../db/statement.ts';
import { CLAIMED_DELIVERY_COLUMNS } from './delivery-queries.ts';

/**
 * Events of one type: their data, or a query of the statement they are written by that
 * answers each event's data (`value`, jsonb) and its place among them (`n`).
 */
export type EventSource = ReadonlyArray<Record<string, unknown>> | { readonly select: string };

/**
 * The delivery rows of events of one type (one per event and active webhook subscribed to
 * it, in order), as a part of a larger statement: the events' own transaction or statement.
 *
 * The events are given as data, or as a query of the statement they are a part of (`select`,
 * answering each event's data as `value` and its place as `n`), for a statement that makes
 * the events' data from rows it reads itself.
 *
 * Each webhook is read under a FOR KEY SHARE lock (the lock its delivery's foreign key takes
 * anyway), which is what makes an event and a change of its webhook meet in one order or the
 * other, never in between. A change that turns a webhook off, unsubscribes it or deletes it
 * locks its row FOR UPDATE first (lockWebhook, src/webhooks/queries.ts): an event that read
 * the row before waits for that change to commit, and is then written only if the row as
 * committed is still active and subscribed (PostgreSQL checks a locked row's conditions again
 * against its newest version). One written first holds its lock until its transaction
 * commits, so the change, waiting for it, then closes its delivery with the others. Without
 * the lock, an event could be written for a webhook deleted meanwhile (a foreign-key error
 * that failed the whole statement, a batch of token issues with it) or left pending for a
 * webhook turned off, which no claim ever takes.
 *
 * With `lease`, the rows are written already claimed for their first attempt and leased to
 * the dispatcher they will be handed to, and the statement answers them as that dispatcher
 * needs them (ClaimedDelivery, src/webhooks/delivery-queries.ts). With `counted`, it answers
 * how many rows it wrote (`n`): none when no active webhook is subscribed to the event.
 */
export function deliveryRows(event: string, data: EventSource, options: { leaseMs: number } | { counted: true } | null = null): WritePart | null {
  const lease = options && 'leaseMs' in options ? options : null;
  const counted = options !== null && 'counted' in options;
  if (Array.isArray(data) && data.length === 0) return null;
  const part: WritePart = {
    sql: (bind) => {
      const name = bind(event);
      const events = 'select' in data ? `(${data.select}) AS e(value, n)` : `jsonb_array_elements(${bind(JSON.stringify(data))}::jsonb) WITH ORDINALITY AS e(value, n)`;
      const [columns, values] = lease
        ? [', attempts, locked_until', `, 1, now() + make_interval(secs => ${bind(lease.leaseMs)}::double precision / 1000)`]
        : ['', ''];
      return `INSERT INTO webhook_deliveries (id, webhook_id, event, data${columns})
       SELECT gen_random_uuid(), w.id, ${name}::text, e.value${values}
       FROM ${events}
       CROSS JOIN webhooks w WHERE w.active AND ${name}::text = ANY (w.events)
       ORDER BY e.n, w.id
       FOR KEY SHARE OF w${lease ? '\n       RETURNING id, webhook_id, event, data, attempts' : counted ? '\n       RETURNING 1' : ''}`;
    },
  };
  if (lease) part.answer = (cte) => `${CLAIMED_DELIVERY_COLUMNS} FROM ${cte} d JOIN webhooks w ON w.id = d.webhook_id`;
  else if (counted) part.answer = (cte) => `count(*)::int AS n FROM ${cte}`;
  return part;
}
