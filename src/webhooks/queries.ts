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

/** A delivery as claimed for one attempt, with what is needed to send it. */
export interface ClaimedDelivery {
  id: string;
  webhook_id: number;
  event: string;
  data: unknown;
  /** Including the attempt being made now. */
  attempts: number;
  url: string;
  secret: string;
}

/** The columns of a ClaimedDelivery, from its delivery row `d` and its webhook `w`. */
export const CLAIMED_DELIVERY_COLUMNS = 'd.id, d.webhook_id, d.event, d.data, d.attempts, w.url, w.secret';

/**
 * Claims up to `limit` due deliveries for one attempt each, in one statement: FOR UPDATE
 * SKIP LOCKED makes concurrent claimers (other instances) pass over rows being claimed, and
 * the lease (`locked_until`) keeps a claimed row away from every claimer until this attempt
 * has been recorded, or, if this process died mid-attempt, until the lease runs out.
 * `attempts` is counted here, so an attempt that was made is counted even if we crash.
 * The same statement closes, as failed, the pending deliveries of webhooks that are off and
 * that nobody holds a lease on any more (found through webhook_deliveries_pending_by_webhook:
 * an index probe per webhook that is off).
 */
export async function claimDueDeliveries(q: Queryable, limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
  const r = await q.query<ClaimedDelivery>(
    `WITH orphaned AS (
       -- deliveries of a webhook turned off that were leased then (disableWebhook leaves those to
       -- their dispatcher) and never recorded: that dispatcher stopped or died, or the record
       -- failed. No claim takes them again, so they are closed here once their lease has run out.
       UPDATE webhook_deliveries d
       SET status = 'failed', last_error = COALESCE(w.disabled_reason, 'webhook disabled'), completed_at = now(), locked_until = NULL
       FROM webhooks w
       WHERE d.id IN (
           SELECT o.id FROM webhooks ow JOIN webhook_deliveries o ON o.webhook_id = ow.id
           WHERE NOT ow.active AND o.status = 'pending' AND (o.locked_until IS NULL OR o.locked_until <= now())
           LIMIT 500 -- a claim stays short; the next one closes more
           FOR UPDATE OF o SKIP LOCKED)
         AND w.id = d.webhook_id AND NOT w.active AND d.status = 'pending'
     ), due AS (
       SELECT d.id FROM webhook_deliveries d
       WHERE d.status = 'pending' AND d.next_attempt_at <= now()
         AND (d.locked_until IS NULL OR d.locked_until <= now())
         AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = d.webhook_id AND w.active)
       ORDER BY d.next_attempt_at
       LIMIT $1
       FOR UPDATE OF d SKIP LOCKED
     )
     UPDATE webhook_deliveries d
     SET locked_until = now() + make_interval(secs => $2::double precision / 1000), attempts = d.attempts + 1
     FROM due, webhooks w
     WHERE d.id = due.id AND w.id = d.webhook_id
     RETURNING ${CLAIMED_DELIVERY_COLUMNS}`,
    [limit, leaseMs],
    { prepare: true },
  );
  return r.rows;
}

/**
 * Gives back deliveries this dispatcher held the lease for but never attempted: unleased,
 * with the attempt that was counted for them uncounted, ready for any claimer now. Those of a
 * webhook turned off meanwhile are closed as failed instead, as disableWebhook closes the
 * unleased ones: it cannot close these (they were leased), and no claim would ever take them.
 * The webhook row is locked FOR SHARE, so a disable committing meanwhile is waited for and
 * seen rather than read past.
 */
export async function releaseDeliveries(q: Queryable, deliveries: ReadonlyArray<{ id: string; attempt: number }>): Promise<void> {
  if (deliveries.length === 0) return;
  await q.query(
    `WITH given AS (
       SELECT r.id, r.attempt FROM unnest($1::uuid[], $2::int[]) AS r(id, attempt)
     ), hooks AS (
       SELECT w.id, w.active, w.disabled_reason FROM webhooks w
       WHERE w.id IN (SELECT d.webhook_id FROM webhook_deliveries d JOIN given g ON g.id = d.id)
       FOR SHARE
     )
     UPDATE webhook_deliveries d SET
       locked_until = NULL,
       attempts = d.attempts - 1,
       status = CASE WHEN w.active THEN 'pending' ELSE 'failed' END,
       last_error = CASE WHEN w.active THEN d.last_error ELSE COALESCE(w.disabled_reason, 'webhook disabled') END,
       completed_at = CASE WHEN w.active THEN NULL ELSE now() END
     FROM given g, hooks w
     WHERE d.id = g.id AND d.attempts = g.attempt AND d.status = 'pending' AND w.id = d.webhook_id`,
    [deliveries.map((d) => d.id), deliveries.map((d) => d.attempt)],
  );
}

/** Where a webhook's deliveries go now, and whether they go at all. */
export interface WebhookTarget {
  id: number;
  active: boolean;
  url: string;
  secret: string;
}

/**
 * The current url, secret and active flag of these webhooks (those deleted are missing), for
 * deliveries that waited in a dispatcher's memory while an administrator may have changed them.
 */
export async function findWebhookTargets(q: Queryable, ids: readonly number[]): Promise<WebhookTarget[]> {
  const r = await q.query<WebhookTarget>('SELECT id, active, url, secret FROM webhooks WHERE id = ANY($1::int[])', [[...new Set(ids)]], { prepare: true });
  return r.rows;
}

/** The outcome of one attempt, to be recorded. `retryInMs` null: no further attempt. */
export interface AttemptRecord {
  id: string;
  attempt: number;
  status: 'pending' | 'succeeded' | 'failed';
  statusCode: number | null;
  error: string | null;
  retryInMs: number | null;
  durationMs: number;
}

/**
 * Records attempts, any number in one statement (so under load the dispatcher needs one
 * round trip for a whole batch): each goes into the attempt log, and its outcome onto the
 * delivery we hold the lease for. The `attempts = attempt` condition makes a late writer
 * (whose lease expired and whose row was claimed again) leave the delivery alone.
 */
export async function recordAttempts(q: Queryable, records: readonly AttemptRecord[]): Promise<void> {
  if (records.length === 0) return;
  await q.query(
    `WITH input AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb)
         AS x(id uuid, attempt int, status text, "statusCode" int, error text, "retryInMs" double precision, "durationMs" int)
     ), logged AS (
       INSERT INTO webhook_attempts (delivery_id, attempt, status_code, error, duration_ms)
       SELECT id, attempt, "statusCode", error, "durationMs" FROM input
     ), outcome AS (
       -- a retry for a webhook disabled meanwhile (410, or by an administrator) ends here
       SELECT i.*, CASE WHEN i.status = 'pending' AND NOT w.active THEN 'failed' ELSE i.status END AS final
       FROM input i JOIN webhook_deliveries d ON d.id = i.id JOIN webhooks w ON w.id = d.webhook_id
     )
     UPDATE webhook_deliveries d SET
       status = o.final,
       last_status_code = o."statusCode",
       last_error = o.error,
       locked_until = NULL,
       next_attempt_at = CASE WHEN o.final = 'pending' THEN now() + make_interval(secs => o."retryInMs" / 1000)
                              ELSE d.next_attempt_at END,
       completed_at = CASE WHEN o.final = 'pending' THEN NULL ELSE now() END
     FROM outcome o
     WHERE d.id = o.id AND d.attempts = o.attempt AND d.status = 'pending'`,
    [JSON.stringify(records)],
    { prepare: true },
  );
}

/**
 * A receiver answered 410 Gone, or an administrator turned the webhook off: it is disabled
 * and its other pending deliveries are closed as failed, so nothing more is sent to it. The
 * caller has locked the row with lockWebhook(…, true) first, in the same transaction, so
 * that events being written for it are closed too or not written at all. Those
 * leased to a dispatcher are left to it: one being attempted ends with its record
 * (recordAttempts), one waiting in its memory is closed before it would begin
 * (releaseDeliveries, src/webhooks/dispatcher.ts), and one whose record never comes (its
 * dispatcher stopped or died) by the first claim after its lease has run out
 * (claimDueDeliveries).
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
