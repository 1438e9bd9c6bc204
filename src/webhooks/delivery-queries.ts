import type { Queryable } from '../db/db.ts';

// The dispatcher's side of the outbox: claiming deliveries, giving them back, recording attempts
// (src/webhooks/dispatcher.ts, attempts.ts). The webhooks' own rows: queries.ts.

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
 * an index probe per webhook that is off). Deliveries of the webhooks in `skipWebhooks` are
 * left for later claims, and so are those of a webhook locked by a change that may turn it off
 * (lockWebhook, src/webhooks/queries.ts), which closes them if it does.
 */
export async function claimDueDeliveries(q: Queryable, limit: number, leaseMs: number, skipWebhooks: readonly number[] = []): Promise<ClaimedDelivery[]> {
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
       SELECT d.id FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
       WHERE d.status = 'pending' AND d.next_attempt_at <= now()
         AND (d.locked_until IS NULL OR d.locked_until <= now())
         AND w.active
         AND d.webhook_id <> ALL ($3::int[]) -- webhooks with all the attempts in flight they may have
       ORDER BY d.next_attempt_at
       LIMIT $1
       FOR UPDATE OF d SKIP LOCKED
       -- a webhook locked FOR UPDATE is being turned off (a 410, an administrator), deleted or
       -- given new events: its deliveries are passed over until that change commits (turning it
       -- off closes them; otherwise a later claim takes them). Read past the lock, it was still
       -- active, and a delivery the 410 was about to close was claimed and sent after it.
       FOR KEY SHARE OF w SKIP LOCKED
     )
     UPDATE webhook_deliveries d
     SET locked_until = now() + make_interval(secs => $2::double precision / 1000), attempts = d.attempts + 1
     FROM due, webhooks w
     WHERE d.id = due.id AND w.id = d.webhook_id
     RETURNING ${CLAIMED_DELIVERY_COLUMNS}`,
    [limit, leaseMs, skipWebhooks],
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
