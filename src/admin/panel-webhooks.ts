import type { Request, RequestHandler, Response } from 'express';
import type { Db } from '../db/db.ts';
import { AppError } from '../http/errors.ts';
import { input } from '../http/validate.ts';
import { flashNext } from '../pages/render.ts';
import { EVENT_TYPES } from '../webhooks/events.ts';
import { registerWebhookSchema } from '../webhooks/schemas.ts';
import type { WebhookService } from '../webhooks/service.ts';
import { actorOf, idParam } from './actor.ts';
import { activeForm, webhookForm } from './form-schemas.ts';
import { refusedForm, renderAdmin } from './panel-common.ts';
import { listWebhookSummaries, setWebhookActive } from './webhooks.ts';

/** What each event means, for the checkboxes (SPEC 6 and DESIGN.md). */
export const EVENT_LABELS: Record<string, string> = {
  'user.login': 'A user signed in to a client system (SSO token issued)',
  'user.logout': 'A user signed out',
  'user.login_failed': 'A sign-in failed',
  'user.locked': 'An account was locked after failed sign-ins',
  'user.2fa_enabled': 'A user turned on two-factor sign-in',
  'token.expired': 'An SSO token expired unused',
  'client.registered': 'A client system was registered',
};

/** Settings › Webhooks: register, list with the last outcome, delivery log, redeliver, disable, delete. */
export function webhookPanel(deps: { db: Db; webhooks: WebhookService }) {
  const { db, webhooks } = deps;
  const events = EVENT_TYPES.map((name) => ({ name, label: EVENT_LABELS[name] ?? name }));

  const renderList = async (req: Request, res: Response, form: { url?: string; events?: string[] } = {}, refused?: unknown) => {
    renderAdmin(req, res, 'webhooks', { section: 'webhooks', webhooks: await listWebhookSummaries(db), events, form },
      refused === undefined ? {} : refusedForm(refused));
  };

  const list: RequestHandler = (req, res) => renderList(req, res);

  const register: RequestHandler = async (req, res) => {
    const form = input(res, webhookForm);
    const chosen = form.events === undefined ? [] : ([] as string[]).concat(form.events);
    // the API's schema, so the panel refuses exactly what POST /api/webhooks refuses
    const parsed = registerWebhookSchema.safeParse({ url: form.url, secret: form.secret, events: chosen });
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const field = String(issue.path[0] ?? '');
      // `field` lets the page mark the input at fault (see pages/field-errors.ts)
      throw new AppError(400, 'validation_error', field === 'events' ? 'Tick at least one event.' : `${field}: ${issue.message}`, { extra: { field } });
    }
    const created = await webhooks.register(parsed.data, actorOf(req, res, 'admin_panel'));
    flashNext(req, { type: 'success', text: `The webhook was registered. Deliveries will appear below as events happen.` });
    res.redirect(303, `/admin/webhooks/${created.id}`);
  };

  /** A refused registration is shown on the same page with what was typed (never the secret), the fields marked. */
  const registerFailed = async (err: unknown, req: Request, res: Response, next: (e?: unknown) => void) => {
    if (!(err instanceof AppError) || err.status >= 500 || [401, 403, 429].includes(err.status)) return next(err);
    const body = req.body as { url?: unknown; events?: unknown };
    const chosen = ([] as unknown[]).concat(body.events ?? []).filter((e): e is string => typeof e === 'string');
    await renderList(req, res, { url: typeof body.url === 'string' ? body.url : '', events: chosen }, err);
  };

  const show: RequestHandler = async (req, res) => {
    const id = idParam(req);
    const webhook = (await webhooks.list()).find((w) => w.id === id);
    if (!webhook) throw new AppError(404, 'webhook_not_found', 'There is no webhook with this id.');
    renderAdmin(req, res, 'webhook', { section: 'webhooks', webhook, deliveries: await webhooks.deliveries(id, 100) });
  };

  const setActive: RequestHandler = async (req, res) => {
    const id = idParam(req);
    const active = input(res, activeForm).active === 'true';
    await setWebhookActive(db, id, active, actorOf(req, res, 'admin_panel'));
    flashNext(req, { type: 'success', text: active ? 'The webhook is enabled again.' : 'The webhook is disabled; pending deliveries were closed.' });
    res.redirect(303, `/admin/webhooks/${id}`);
  };

  const remove: RequestHandler = async (req, res) => {
    const id = idParam(req);
    await webhooks.remove(id, actorOf(req, res, 'admin_panel'));
    flashNext(req, { type: 'success', text: 'The webhook and its delivery log were deleted.' });
    res.redirect(303, '/admin/webhooks');
  };

  const redeliver: RequestHandler = async (req, res) => {
    const id = idParam(req);
    await webhooks.redeliver(id, String(req.params.delivery), actorOf(req, res, 'admin_panel'));
    flashNext(req, { type: 'success', text: 'The delivery was queued again with the same delivery id.' });
    res.redirect(303, `/admin/webhooks/${id}`);
  };

  return { list, register, registerFailed, show, setActive, remove, redeliver };
}
