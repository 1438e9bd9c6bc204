import type { Request, RequestHandler, Response } from 'express';
import type { z } from 'zod';
import type { Db } from '../db/db.ts';
import { AppError } from '../http/errors.ts';
import { input } from '../http/validate.ts';
import { flashNext } from '../pages/render.ts';
import { EVENT_TYPES } from '../webhooks/events.ts';
import { registerWebhookSchema, updateWebhookSchema } from '../webhooks/schemas.ts';
import type { WebhookService } from '../webhooks/service.ts';
import { actorOf, idParam } from './actor.ts';
import { activeForm, webhookEditForm, webhookForm } from './form-schemas.ts';
import { refusedForm, renderAdmin } from './panel-common.ts';
import { listWebhookSummaries } from './webhooks.ts';

/** The ticked event checkboxes: none, one (a string) or several. */
const ticked = (events: string | string[] | undefined): string[] => (events === undefined ? [] : ([] as string[]).concat(events));

/** A form's values checked with the API's schema; the first problem as a 400 the form shows. */
function apiInput<S extends z.ZodType>(schema: S, values: unknown): z.infer<S> {
  const parsed = schema.safeParse(values);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = String(issue.path[0] ?? '');
  // `field` lets the page mark the input at fault (see pages/field-errors.ts)
  throw new AppError(400, 'validation_error', field === 'events' ? 'Tick at least one event.' : `${field}: ${issue.message}`, { extra: { field } });
}

/** What each event means, for the checkboxes (docs/contract.md, "Webhooks"). */
export const EVENT_LABELS: Record<string, string> = {
  'user.login': 'A user signed in to a client system (SSO token issued)',
  'user.logout': 'A user signed out',
  'user.login_failed': 'A sign-in failed',
  'user.locked': 'An account was locked after failed sign-ins',
  'user.2fa_enabled': 'A user turned on two-factor sign-in',
  'token.expired': 'An SSO token expired unused',
  'client.registered': 'A client system was registered',
};

/** Settings › Webhooks: register, list with the last outcome, edit (URL, events, secret), delivery log, redeliver, disable, delete. */
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
    // the API's schema, so the panel refuses exactly what POST /api/webhooks refuses
    const parsed = apiInput(registerWebhookSchema, { url: form.url, secret: form.secret, events: ticked(form.events) });
    const created = await webhooks.register(parsed, actorOf(req, res, 'admin_panel'));
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
    renderAdmin(req, res, 'webhook', { section: 'webhooks', webhook, events, deliveries: await webhooks.deliveries(id, 100) });
  };

  /** The edit form: URL, events and, when one is typed, a new secret (PATCH /api/webhooks/:id's rules). */
  const update: RequestHandler = async (req, res) => {
    const id = idParam(req);
    const form = input(res, webhookEditForm);
    const parsed = apiInput(updateWebhookSchema, { url: form.url, events: ticked(form.events), ...(form.secret === '' ? {} : { secret: form.secret }) });
    await webhooks.update(id, parsed, actorOf(req, res, 'admin_panel'));
    flashNext(req, {
      type: 'success',
      text: form.secret === '' ? 'The webhook was saved.' : 'The webhook was saved. Every later attempt, retries included, is signed with the new secret.',
    });
    res.redirect(303, `/admin/webhooks/${id}`);
  };

  const setActive: RequestHandler = async (req, res) => {
    const id = idParam(req);
    const active = input(res, activeForm).active === 'true';
    await webhooks.setActive(id, active, actorOf(req, res, 'admin_panel'));
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

  return { list, register, registerFailed, show, update, setActive, remove, redeliver };
}
