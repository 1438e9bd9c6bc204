import { writeAudit } from '../audit/writer.ts';
import { actorDetails, type Actor } from '../audit/actor.ts';
import type { Deps } from '../context.ts';
import { refuseEditConflicts } from '../http/edit-conflict.ts';
import { AppError } from '../http/errors.ts';
import { guardPolicy, type Lookup, parseWebhookUrl, resolveTarget, systemLookup, UrlNotAllowedError } from './address-guard.ts';
import { eventSet, type EventType } from './events.ts';
import {
  deleteWebhook, disableWebhook, enableWebhook, findWebhook, insertWebhook, listDeliveries, listWebhooks, lockWebhook, requeueDelivery, updateWebhook, type WebhookRecord,
} from './queries.ts';

/** A webhook as administrators see it: never the secret. */
export interface PublicWebhook {
  id: number;
  url: string;
  events: string[];
  active: boolean;
  created_at: string;
  disabled_reason?: string | null;
}

function toPublic(w: WebhookRecord, detailed = false): PublicWebhook {
  const base = { id: w.id, url: w.url, events: w.events, active: w.active, created_at: new Date(w.created_at).toISOString() };
  return detailed ? { ...base, disabled_reason: w.disabled_reason } : base;
}

const iso = (v: Date | string | null) => (v === null ? null : new Date(v).toISOString());

function audit(actor: Actor) {
  return { userId: actor.userId ?? null, username: actor.username ?? null, ipAddress: actor.ipAddress ?? null, userAgent: actor.userAgent ?? null };
}

/** Webhook registration and the delivery log (admin API). */
export function createWebhookService(deps: Pick<Deps, 'db' | 'config' | 'events'> & { lookup?: Lookup }) {
  const { db, config, events } = deps;
  const policy = guardPolicy(config);
  const lookup = deps.lookup ?? systemLookup;

  async function findOr404(id: number): Promise<WebhookRecord> {
    const webhook = Number.isSafeInteger(id) ? await findWebhook(db, id) : null;
    if (!webhook) throw new AppError(404, 'webhook_not_found', `No webhook ${id}`);
    return webhook;
  }

  /**
   * A receiver URL as registration accepts it: absolute http(s); in production its host
   * must resolve only to public addresses (checked again before every attempt, since DNS
   * answers change). 400 invalid_url or url_not_allowed otherwise.
   */
  async function checkedUrl(raw: string): Promise<URL> {
    try {
      const url = parseWebhookUrl(raw.trim());
      if (policy.blockPrivate) await resolveTarget(url, policy, lookup);
      return url;
    } catch (err) {
      if (!(err instanceof UrlNotAllowedError)) throw err;
      throw new AppError(400, err.reason === 'invalid_url' ? 'invalid_url' : 'url_not_allowed', err.message);
    }
  }

  return {
    /** Registers a webhook (the URL checked by `checkedUrl`). */
    async register(input: { url: string; events: EventType[]; secret: string }, actor: Actor): Promise<PublicWebhook> {
      const url = await checkedUrl(input.url);
      const events = [...new Set(input.events)];
      const webhook = await db.transaction(async (tx) => {
        const created = await insertWebhook(tx, { url: url.toString(), events, secret: input.secret, createdBy: actor.userId ?? null });
        await writeAudit(tx, {
          action: 'webhook.create', outcome: 'success', ...audit(actor),
          details: { ...actorDetails(actor), webhook_id: created.id, url: created.url, events },
        });
        return created;
      });
      return toPublic(webhook);
    },

    /**
     * Changes any of url, events, active and secret, validated as at registration, keeping
     * the delivery history. Later attempts, retries of earlier events included, use the new
     * URL and secret. Turning it off closes its pending deliveries as failed (as the panel's
     * Disable and a receiver's 410 do). Audited with what really changed (compared with the row
     * before), never the secret itself; a change that changes nothing is not audited.
     * `shown`: the URL and events the editing page showed (the panel's form); a field saved
     * here that someone else changed since is refused, under the row's lock (409 edit_conflict).
     */
    async update(
      id: number,
      input: { url?: string; events?: EventType[]; active?: boolean; secret?: string },
      actor: Actor,
      shown?: { url?: string; events?: readonly string[] },
    ): Promise<PublicWebhook> {
      const url = input.url === undefined ? undefined : (await checkedUrl(input.url)).toString();
      const events = input.events === undefined ? undefined : [...new Set(input.events)];
      const webhook = await db.transaction(async (tx) => {
        // turning it off or changing its events must meet events being written in one order
        const closing = input.active === false || events !== undefined;
        const before = Number.isSafeInteger(id) ? await lockWebhook(tx, id, closing) : null;
        if (!before) throw new AppError(404, 'webhook_not_found', `No webhook ${id}`);
        // a field the editing page showed otherwise than it is now, and saved as neither: someone else's change (the panel's form)
        refuseEditConflicts(shown && { url: shown.url, events: shown.events && eventSet(shown.events) },
          { url: before.url, events: eventSet(before.events) }, { url, events: events && eventSet(events) });
        await updateWebhook(tx, id, { url, events, secret: input.secret, active: input.active === true ? true : undefined });
        if (input.active === false && before.active) await disableWebhook(tx, id, `disabled by ${actor.username ?? 'an administrator'}`);
        const after = (await findWebhook(tx, id))!;
        // what really changed (a form or a PATCH may send fields as they are): a save that changes nothing writes no entry
        const changed = [
          ...(after.active !== before.active ? ['active'] : []),
          ...(eventSet(after.events) !== eventSet(before.events) ? ['events'] : []),
          ...(after.secret !== before.secret ? ['secret'] : []),
          ...(after.url !== before.url ? ['url'] : []),
        ];
        if (changed.length === 0) return after;
        await writeAudit(tx, {
          action: 'webhook.update', outcome: 'success', ...audit(actor),
          details: {
            ...actorDetails(actor), webhook_id: id, changed,
            url: after.url, ...(after.url !== before.url ? { previous_url: before.url } : {}), events: after.events, active: after.active,
          },
        });
        return after;
      });
      return toPublic(webhook, true);
    },

    /**
     * Turns a webhook off (as a 410 from the receiver would: pending deliveries are closed) or
     * back on. Audited with the acting administrator.
     */
    async setActive(id: number, active: boolean, actor: Actor): Promise<void> {
      await db.transaction(async (tx) => {
        const found = await lockWebhook(tx, id, !active);
        if (!found) throw new AppError(404, 'webhook_not_found', `No webhook ${id}`);
        // already so (a second tab, another administrator): nothing changes, nothing is audited,
        // and the reason it is off (a receiver's 410, say) is kept
        if (found.active === active) return;
        if (active) await enableWebhook(tx, id);
        else await disableWebhook(tx, id, `disabled by ${actor.username ?? 'an administrator'}`);
        await writeAudit(tx, {
          action: active ? 'webhook.enable' : 'webhook.disable', outcome: 'success', ...audit(actor),
          details: { ...actorDetails(actor), webhook_id: id, url: found.url },
        });
      });
    },

    async list(): Promise<PublicWebhook[]> {
      return (await listWebhooks(db)).map((w) => toPublic(w, true));
    },

    /** Deletes a webhook with its pending and past deliveries. */
    async remove(id: number, actor: Actor): Promise<void> {
      await db.transaction(async (tx) => {
        const deleted = Number.isSafeInteger(id) ? await deleteWebhook(tx, id) : null;
        if (!deleted) throw new AppError(404, 'webhook_not_found', `No webhook ${id}`);
        await writeAudit(tx, {
          action: 'webhook.delete', outcome: 'success', ...audit(actor),
          details: { ...actorDetails(actor), webhook_id: id, url: deleted.url },
        });
      });
    },

    /** The newest deliveries of a webhook with every attempt: status codes, errors, times. */
    async deliveries(id: number, limit: number) {
      await findOr404(id);
      const rows = await listDeliveries(db, id, limit);
      return rows.map((d) => ({
        id: d.id,
        event: d.event,
        status: d.status,
        attempts: d.attempts,
        next_attempt_at: d.status === 'pending' ? iso(d.next_attempt_at) : null,
        last_status_code: d.last_status_code,
        last_error: d.last_error,
        created_at: iso(d.created_at),
        completed_at: iso(d.completed_at),
        attempt_log: d.attempt_log.map((a) => ({ ...a, at: iso(a.at) })),
      }));
    },

    /** Sends a finished delivery again, same delivery id, with a fresh round of attempts. */
    async redeliver(id: number, deliveryId: string, actor: Actor): Promise<{ id: string; status: 'pending' }> {
      await findOr404(id);
      const outcome = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(deliveryId)
        ? await db.transaction(async (tx) => {
          const result = await requeueDelivery(tx, id, deliveryId);
          if (result === 'requeued') {
            events.written(tx);
            await writeAudit(tx, {
              action: 'webhook.redeliver', outcome: 'success', ...audit(actor),
              details: { ...actorDetails(actor), webhook_id: id, delivery_id: deliveryId },
            });
          }
          return result;
        })
        : 'not_found';
      if (outcome === 'not_found') throw new AppError(404, 'delivery_not_found', `No delivery ${deliveryId} for webhook ${id}`);
      if (outcome === 'pending') throw new AppError(409, 'delivery_pending', 'The delivery is still being attempted');
      if (outcome === 'inactive') throw new AppError(409, 'webhook_inactive', 'The webhook is disabled');
      return { id: deliveryId, status: 'pending' };
    },
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;
