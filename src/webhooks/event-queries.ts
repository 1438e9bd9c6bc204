import type { WritePart } from '../db/statement.ts';
import { CLAIMED_DELIVERY_COLUMNS } from './queries.ts';

/**
 * The delivery rows of events of one type (one per event and active webhook subscribed to
 * it, in order), as a part of a larger statement: the events' own transaction or statement.
 *
 * With `lease`, the rows are written already claimed for their first attempt and leased to
 * the dispatcher they will be handed to, and the statement answers them as that dispatcher
 * needs them (ClaimedDelivery, src/webhooks/queries.ts).
 */
export function deliveryRows(event: string, data: ReadonlyArray<Record<string, unknown>>, lease?: { leaseMs: number }): WritePart | null {
  if (data.length === 0) return null;
  const part: WritePart = {
    sql: (bind) => {
      const name = bind(event);
      const events = bind(JSON.stringify(data));
      const [columns, values] = lease
        ? [', attempts, locked_until', `, 1, now() + make_interval(secs => ${bind(lease.leaseMs)}::double precision / 1000)`]
        : ['', ''];
      return `INSERT INTO webhook_deliveries (id, webhook_id, event, data${columns})
       SELECT gen_random_uuid(), w.id, ${name}::text, e.value${values}
       FROM jsonb_array_elements(${events}::jsonb) WITH ORDINALITY AS e(value, n)
       CROSS JOIN webhooks w WHERE w.active AND ${name}::text = ANY (w.events)
       ORDER BY e.n, w.id${lease ? '\n       RETURNING id, webhook_id, event, data, attempts' : ''}`;
    },
  };
  if (lease) part.answer = (cte) => `${CLAIMED_DELIVERY_COLUMNS} FROM ${cte} d JOIN webhooks w ON w.id = d.webhook_id`;
  return part;
}
