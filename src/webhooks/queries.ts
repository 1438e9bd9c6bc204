import type { Queryable } from '../db/db.ts';

/** A webhook row; `secret` never leaves the service. */
export interface WebhookRecord {
  id: number;
  url: string;
  events: string[];
  secret: string;
  active: boolean;
  disabled_reason: string | null;
  created_by: number | null;
  created_at: Date;
}

export async function insertWebhook(q: Queryable, w: { url: string; events: string[]; secret: string; createdBy: number | null }): Promise<WebhookRecord> {
  const r = await q.query<WebhookRecord>(
    'INSERT INTO webhooks (url, events, secret, created_by) VALUES ($1, $2, $3, $4) RETURNING *',
    [w.url, w.events, w.secret, w.createdBy],
  );
  return r.rows[0];
}

export async function listWebhooks(q: Queryable): Promise<WebhookRecord[]> {
  return (await q.query<WebhookRecord>('SELECT * FROM webhooks ORDER BY id')).rows;
}

export async function findWebhook(q: Queryable, id: number): Promise<WebhookRecord | null> {
  return (await q.query<WebhookRecord>('SELECT * FROM webhooks WHERE id = $1', [id])).rows[0] ?? null;
}

/**
 * A webhook row, locked until the end of the transaction (the caller is about to change it).
 * `closing`: the change turns it off or changes its events, so events being written now must
 * wait for it (FOR UPDATE, the one lock their FOR KEY SHARE waits for: deliveryRows,
 * src/webhooks/event-queries.ts); any other change (URL, secret, turning it on) locks it FOR
 * NO KEY UPDATE and holds up no event.
 */
export async function lockWebhook(q: Queryable, id: number, closing: boolean): Promise<WebhookRecord | null> {
  const sql = closing ? 'SELECT * FROM webhooks WHERE id = $1 FOR UPDATE' : 'SELECT * FROM webhooks WHERE id = $1 FOR NO KEY UPDATE';
  return (await q.query<WebhookRecord>(sql, [id])).rows[0] ?? null;
}

/**
 * Changes the url, events, secret or active flag of a webhook; a field left undefined keeps
 * its value. Turning it on clears why it was off. Its deliveries stay (history and pending
 * ones alike): the dispatcher reads url and secret from this row at every claim, and again
 * before a delivery that waited in its memory goes out, so each later attempt, retries of earlier events included, goes to the new URL with the new secret.
 */
export async function updateWebhook(
  q: Queryable,
  id: number,
  patch: { url?: string; events?: string[]; secret?: string; active?: boolean },
): Promise<WebhookRecord | null> {
  const r = await q.query<WebhookRecord>(
    `UPDATE webhooks SET
       url = COALESCE($2, url),
       events = COALESCE($3::text[], events),
       secret = COALESCE($4, secret),
       active = COALESCE($5, active),
       disabled_reason = CASE WHEN $5::boolean THEN NULL ELSE disabled_reason END
     WHERE id = $1 RETURNING *`,
    [id, patch.url ?? null, patch.events ?? null, patch.secret ?? null, patch.active ?? null],
  );
  return r.rows[0] ?? null;
}

/** How many deliveries wait to be sent or retried (the outbox depth, for /metrics). */
export async function countPendingDeliveries(q: Queryable): Promise<number> {
  const r = await q.query<{ n: number }>("SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'pending'");
  return r.rows[0]?.n ?? 0;
}

/** Turns a webhook back on and forgets why it was off. */
export async function enableWebhook(q: Queryable, id: number): Promise<void> {
  await q.query('UPDATE webhooks SET active = true, disabled_reason = NULL WHERE id = $1', [id]);
}

/** Deletes a webhook; its deliveries and attempts go with it (ON DELETE CASCADE). */
export async function deleteWebhook(q: Queryable, id: number): Promise<WebhookRecord | null> {
  return (await q.query<WebhookRecord>('DELETE FROM webhooks WHERE id = $1 RETURNING *', [id])).rows[0] ?? null;
}

/**
 * A receiver answered 410 Gone, or an administrator turned the webhook off: it is disabled
 * and its other pending deliveries are closed as failed, so nothing more is sent to it. The
 * caller has locked the row with lockWebhook(…, true) first, in the same transaction, so
 * that events being written for it are closed too or not written at all. Those
 * leased to a dispatcher are left to it: one being attempted ends with its record
 * (recordAttempts, delivery-queries.ts), one waiting in its memory is closed before it would begin
 * (releaseDeliveries, src/webhooks/dispatcher.ts), and one whose record never comes (its
 * dispatcher stopped or died) by the first claim after its lease has run out
 * (claimDueDeliveries, delivery-queries.ts).
 */
export async function disableWebhook(q: Queryable, webhookId: number, reason: string): Promise<void> {
  await q.query('UPDATE webhooks SET active = false, disabled_reason = $2 WHERE id = $1', [webhookId, reason]);
  await q.query(
    `UPDATE webhook_deliveries SET status = 'failed', last_error = $2, completed_at = now(), locked_until = NULL
     WHERE webhook_id = $1 AND status = 'pending' AND (locked_until IS NULL OR locked_until <= now())`,
    [webhookId, reason],
  );
}

/** A delivery and its attempts, for GET /api/webhooks/:id/deliveries. */
export interface DeliveryRow {
  id: string;
  event: string;
  status: string;
  attempts: number;
  next_attempt_at: Date;
  last_status_code: number | null;
  last_error: string | null;
  created_at: Date;
  completed_at: Date | null;
  attempt_log: Array<{ attempt: number; at: string; status_code: number | null; error: string | null; duration_ms: number }>;
}

export async function listDeliveries(q: Queryable, webhookId: number, limit: number): Promise<DeliveryRow[]> {
  const r = await q.query<DeliveryRow>(
    `SELECT d.id, d.event, d.status, d.attempts, d.next_attempt_at, d.last_status_code, d.last_error, d.created_at, d.completed_at,
       COALESCE((SELECT jsonb_agg(jsonb_build_object('attempt', a.attempt, 'at', a.at, 'status_code', a.status_code,
                                                     'error', a.error, 'duration_ms', a.duration_ms) ORDER BY a.id)
                 FROM webhook_attempts a WHERE a.delivery_id = d.id), '[]'::jsonb) AS attempt_log
     FROM webhook_deliveries d WHERE d.webhook_id = $1
     ORDER BY d.created_at DESC, d.id LIMIT $2`,
    [webhookId, limit],
  );
  return r.rows;
}

/**
 * Queues a finished delivery again (same id, so the receiver can still deduplicate) for a
 * fresh round of attempts. Pending deliveries are left alone; the webhook must be active, as
 * it is once a change turning it off that is under way has committed. Call inside a
 * transaction: the webhook's row stays locked (FOR KEY SHARE) until it ends.
 */
export async function requeueDelivery(q: Queryable, webhookId: number, deliveryId: string): Promise<'requeued' | 'pending' | 'inactive' | 'not_found'> {
  // the webhook first, then its delivery: the order of every other path that locks both (a
  // change turning it off, a 410, a delete and its cascade), so none of them can deadlock with
  // this; a change turning it off that is under way is waited for, and seen
  await q.query('SELECT 1 FROM webhooks WHERE id = $1 FOR KEY SHARE', [webhookId]);
  const r = await q.query<{ outcome: string }>(
    `WITH target AS (
       SELECT d.id, d.status, w.active FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
       WHERE d.id = $2 AND d.webhook_id = $1
       -- a delivery being pruned is waited for and then not found
       FOR NO KEY UPDATE OF d
     ), requeued AS (
       UPDATE webhook_deliveries d SET status = 'pending', attempts = 0, next_attempt_at = now(), locked_until = NULL,
         completed_at = NULL, last_error = NULL, last_status_code = NULL
       FROM target t WHERE d.id = t.id AND d.status <> 'pending' AND t.active
       RETURNING d.id
     )
     SELECT CASE WHEN EXISTS (SELECT 1 FROM requeued) THEN 'requeued'
                 WHEN NOT EXISTS (SELECT 1 FROM target) THEN 'not_found'
                 WHEN (SELECT NOT active FROM target) THEN 'inactive'
                 ELSE 'pending' END AS outcome`,
    [webhookId, deliveryId],
  );
  return r.rows[0].outcome as 'requeued' | 'pending' | 'inactive' | 'not_found';
}
