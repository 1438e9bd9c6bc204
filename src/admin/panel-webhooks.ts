import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import type { z } from 'zod';
import type { Db } from '../db/db.ts';
import { AppError } from '../http/errors.ts';
import { input } from '../http/validate.ts';
import { flashNext } from '../pages/render.ts';
import { EVENT_TYPES, eventSet } from '../webhooks/events.ts';
import { registerWebhookSchema, updateWebhookSchema } from '../webhooks/schemas.ts';
import type { PublicWebhook, WebhookService } from '../webhooks/service.ts';
import { actorOf } from '../auth/actor.ts';
import { idParam } from '../http/params.ts';
import { activeForm, webhookEditForm, webhookForm } from './form-schemas.ts';
import { editedFields, refusedEdit, refusedForm, renderAdmin } from './panel-common.ts';
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

/** The edit form's fields saved only when changed (editedFields); the events as one comma-separated value. */
const EDIT_FIELDS = ['url', 'events'] as const;
type EditValues = Record<(typeof EDIT_FIELDS)[number], string>;
/** The events of a comma-separated value. */
const splitEvents = (text: string | undefined): string[] => (text ?? '').split(',').filter(Boolean);
/** The events compare as a set; the URL as typed, spaces around it aside. */
const sameEditValue = (field: keyof EditValues, a: string, b: string): boolean =>
  (field === 'events' ? eventSet(splitEvents(a)) === eventSet(splitEvents(b)) : a.trim() === b.trim());
/** The edit form's values of a webhook as saved. */
const savedValues = (w: { url: string; events: readonly string[] }): EditValues => ({ url: w.url, events: w.events.join(',') });

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

  /** The webhook the path names, or undefined. */
  const webhookOf = async (req: Request) => {
    const id = idParam(req);
    return (await webhooks.list()).find((w) => w.id === id);
  };

  /**
   * One webhook's page: its edit form holds `form` and judges the next save against `shown`
   * (`was_url`, `was_events`), both as saved unless a refused save gives them.
   */
  const renderDetail = async (
    req: Request, res: Response, webhook: PublicWebhook, form = savedValues(webhook), shown = savedValues(webhook), refused?: unknown,
  ) => {
    renderAdmin(req, res, 'webhook', {
      section: 'webhooks', webhook, events, deliveries: await webhooks.deliveries(webhook.id, 100),
      form: { url: form.url, events: splitEvents(form.events), was_url: shown.url, was_events: shown.events },
    }, refused === undefined ? {} : refusedForm(refused));
  };

  const show: RequestHandler = async (req, res) => {
    const webhook = await webhookOf(req);
    if (!webhook) throw new AppError(404, 'webhook_not_found', 'There is no webhook with this id.');
    await renderDetail(req, res, webhook);
  };

  /**
   * The edit form: URL, events and, when one is typed, a new secret (PATCH /api/webhooks/:id's
   * rules). Only the fields the administrator changed are saved (the form carries what its
   * page showed, `was_url` and `was_events`: editedFields), so a change another administrator
   * made since to the other field stands, and one to the same field is edit_conflict.
   */
  const update: RequestHandler = async (req, res) => {
    const id = idParam(req);
    const form = input(res, webhookEditForm);
    const typed = { url: form.url, events: ticked(form.events).join(',') };
    const edited = editedFields(EDIT_FIELDS, typed, form, sameEditValue);
    const parsed = apiInput(updateWebhookSchema, { url: form.url, events: ticked(form.events), ...(form.secret === '' ? {} : { secret: form.secret }) });
    const shown = { url: edited.includes('url') ? form.was_url : undefined, events: edited.includes('events') && form.was_events !== undefined ? splitEvents(form.was_events) : undefined };
    await webhooks.update(id, {
      url: edited.includes('url') ? parsed.url : undefined, events: edited.includes('events') ? parsed.events : undefined, secret: parsed.secret,
    }, actorOf(req, res, 'admin_panel'), shown);
    flashNext(req, {
      type: 'success',
      text: form.secret === '' ? 'The webhook was saved.' : 'The webhook was saved. Every later attempt, retries included, is signed with the new secret.',
    });
    res.redirect(303, `/admin/webhooks/${id}`);
  };

  /**
   * A save refused because someone else changed a field since the page was shown
   * (edit_conflict) shows the form again with what was typed, judged now against what is
   * saved (refusedEdit); any other refusal goes back to the page with the reason (`back`).
   */
  const updateFailed = (back: ErrorRequestHandler): ErrorRequestHandler => async (err, req, res, next) => {
    if (!(err instanceof AppError) || err.code !== 'edit_conflict') return back(err, req, res, next);
    const webhook = await webhookOf(req);
    if (!webhook) return back(err, req, res, next);
    const body = req.body as Record<string, unknown>;
    const posted = { ...body, events: ticked(body.events as string | string[] | undefined).join(',') };
    const { form, shown } = refusedEdit(EDIT_FIELDS, posted, savedValues(webhook), err, sameEditValue);
    await renderDetail(req, res, webhook, form, shown, err);
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

  return { list, register, registerFailed, show, update, updateFailed, setActive, remove, redeliver };
}
