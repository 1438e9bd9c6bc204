import { writeAudit } from '../audit/writer.ts';
import type { Actor } from '../audit/actor.ts';
import type { Db } from '../db/db.ts';
import { AppError } from '../http/errors.ts';
import { disableWebhook, enableWebhook, lockWebhook } from '../webhooks/queries.ts';

export { listWebhookSummaries, type WebhookSummary } from './queries.ts';

/**
 * Turns a webhook off (as a 410 from the receiver would: pending deliveries are closed) or
 * back on. Audited with the acting administrator.
 */
export async function setWebhookActive(db: Db, id: number, active: boolean, actor: Actor): Promise<void> {
  await db.transaction(async (tx) => {
    const found = await lockWebhook(tx, id);
    if (!found) throw new AppError(404, 'webhook_not_found', `No webhook ${id}`);
    if (active) await enableWebhook(tx, id);
    else await disableWebhook(tx, id, `disabled by ${actor.username ?? 'an administrator'}`);
    await writeAudit(tx, {
      action: active ? 'webhook.enable' : 'webhook.disable', outcome: 'success',
      userId: actor.userId ?? null, username: actor.username ?? null, ipAddress: actor.ipAddress ?? null, userAgent: actor.userAgent ?? null,
      details: { via: actor.via, actor_user_id: actor.userId ?? null, actor: actor.username ?? null, webhook_id: id, url: found.url },
    });
  });
}
