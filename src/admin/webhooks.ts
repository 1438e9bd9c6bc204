import { writeAudit } from '../audit/writer.ts';
import type { Actor } from '../audit/actor.ts';
import type { Db, Queryable } from '../db/db.ts';
import { AppError } from '../http/errors.ts';
import { disableWebhook } from '../webhooks/queries.ts';

/** A webhook in the panel's list: never the secret; the newest delivery's outcome. */
export interface WebhookSummary {
  id: number;
  url: string;
  events: string[];
  active: boolean;
  disabled_reason: string | null;
  created_at: Date;
  last_event: string | null;
  last_status: string | null;
  last_status_code: number | null;
  last_error: string | null;
  last_at: Date | null;
  deliveries: number;
}

/** Every webhook with its newest delivery (one statement, a lateral join per webhook). */
export async function listWebhookSummaries(q: Queryable): Promise<WebhookSummary[]> {
  const r = await q.query<WebhookSummary>(
    `SELECT w.id, w.url, w.events, w.active, w.disabled_reason, w.created_at,
            d.event AS last_event, d.status AS last_status, d.last_status_code, d.last_error,
            COALESCE(d.completed_at, d.created_at) AS last_at,
            (SELECT count(*)::int FROM webhook_deliveries c WHERE c.webhook_id = w.id) AS deliveries
       FROM webhooks w
       LEFT JOIN LATERAL (
         SELECT event, status, last_status_code, last_error, completed_at, created_at
           FROM webhook_deliveries WHERE webhook_id = w.id ORDER BY created_at DESC, id LIMIT 1
       ) d ON true
      ORDER BY w.id`,
  );
  return r.rows;
}

/**
 * Turns a webhook off (as a 410 from the receiver would: pending deliveries are closed) or
 * back on. Audited with the acting administrator.
 */
export async function setWebhookActive(db: Db, id: number, active: boolean, actor: Actor): Promise<void> {
  await db.transaction(async (tx) => {
    const found = await tx.query<{ url: string }>('SELECT url FROM webhooks WHERE id = $1 FOR UPDATE', [id]);
    if (!found.rows[0]) throw new AppError(404, 'webhook_not_found', `No webhook ${id}`);
    if (active) await tx.query('UPDATE webhooks SET active = true, disabled_reason = NULL WHERE id = $1', [id]);
    else await disableWebhook(tx, id, `disabled by ${actor.username ?? 'an administrator'}`);
    await writeAudit(tx, {
      action: active ? 'webhook.enable' : 'webhook.disable', outcome: 'success',
      userId: actor.userId ?? null, username: actor.username ?? null, ipAddress: actor.ipAddress ?? null, userAgent: actor.userAgent ?? null,
      details: { via: actor.via, actor_user_id: actor.userId ?? null, actor: actor.username ?? null, webhook_id: id, url: found.rows[0].url },
    });
  });
}
