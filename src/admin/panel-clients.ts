import type { Request, RequestHandler, Response } from 'express';
import type { ClientRecord } from '../clients/client.ts';
import { type ClientService, toPublicClient } from '../clients/service.ts';
import { AppError } from '../http/errors.ts';
import { input } from '../http/validate.ts';
import { flashNext } from '../pages/render.ts';
import { actorOf, clientIdParam } from './actor.ts';
import { activeForm, clientForm, regenerateForm } from './form-schemas.ts';
import { checked, refusedForm, renderAdmin, splitList } from './panel-common.ts';

type ClientFormValues = { client_name: string; callback_url: string; allowed_ips: string; allow_everything?: string; logo_url?: string };

function formValuesOf(c: ClientRecord): ClientFormValues {
  return { client_name: c.client_name, callback_url: c.callback_url, allowed_ips: c.allowed_ips.join('\n'), logo_url: c.logo_url ?? '' };
}

/**
 * The panel's client-system pages: list, register, detail (edit, activate), regenerate the
 * secret (optionally keeping the old one valid for a grace period).
 */
export function clientPanel(deps: { clients: ClientService }) {
  const { clients } = deps;

  async function clientOr404(req: Request): Promise<ClientRecord> {
    const client = await clients.findClient(clientIdParam(req));
    if (!client) throw new AppError(404, 'client_not_found', 'There is no client system with this id.');
    return client;
  }

  const renderList = async (req: Request, res: Response, form: Partial<ClientFormValues> = {}, refused?: unknown) => {
    renderAdmin(req, res, 'clients', {
      section: 'clients',
      clients: (await clients.listClients()).map(toPublicClient),
      form,
    }, refused === undefined ? {} : refusedForm(refused));
  };

  const renderDetail = (req: Request, res: Response, client: ClientRecord, form: ClientFormValues, refused?: unknown) => {
    // the one-time secret belongs to this page view only: taken out of the session here
    const revealed = req.session.revealedSecret?.client_id === client.client_id ? req.session.revealedSecret : undefined;
    if (revealed) delete req.session.revealedSecret;
    const previousUntil = client.previous_secret_expires_at ? new Date(client.previous_secret_expires_at).toISOString() : null;
    renderAdmin(req, res, 'client', { section: 'clients', client: toPublicClient(client), form, revealed, previousUntil },
      refused === undefined ? {} : refusedForm(refused));
  };

  const list: RequestHandler = (req, res) => renderList(req, res);

  const create: RequestHandler = async (req, res) => {
    const form = input(res, clientForm);
    const { client, secret } = await clients.createClient({
      name: form.client_name,
      callbackUrl: form.callback_url,
      allowedIps: splitList(form.allowed_ips),
      allowEverything: checked(form.allow_everything),
      logoUrl: form.logo_url,
    }, actorOf(req, res, 'admin_panel'));
    req.session.revealedSecret = { client_id: client.client_id, secret, reason: 'created' };
    res.redirect(303, `/admin/clients/${encodeURIComponent(client.client_id)}`);
  };

  const show: RequestHandler = async (req, res) => {
    const client = await clientOr404(req);
    renderDetail(req, res, client, formValuesOf(client));
  };

  const update: RequestHandler = async (req, res) => {
    const client = await clientOr404(req);
    const form = input(res, clientForm);
    await clients.updateClient(client.client_id, {
      clientName: form.client_name,
      callbackUrl: form.callback_url,
      allowedIps: splitList(form.allowed_ips),
      allowEverything: checked(form.allow_everything),
      logoUrl: form.logo_url,
    }, actorOf(req, res, 'admin_panel'));
    flashNext(req, { type: 'success', text: 'The client system was saved. The allow list applies to the next request.' });
    res.redirect(303, `/admin/clients/${encodeURIComponent(client.client_id)}`);
  };

  const setActive: RequestHandler = async (req, res) => {
    const client = await clientOr404(req);
    const active = input(res, activeForm).active === 'true';
    await clients.updateClient(client.client_id, { active }, actorOf(req, res, 'admin_panel'));
    flashNext(req, { type: 'success', text: active ? `${client.client_name} is active again.` : `${client.client_name} is deactivated: its credentials no longer work.` });
    res.redirect(303, `/admin/clients/${encodeURIComponent(client.client_id)}`);
  };

  const confirmRegenerate: RequestHandler = async (req, res) => {
    renderAdmin(req, res, 'client-regenerate', { section: 'clients', client: toPublicClient(await clientOr404(req)) });
  };

  const regenerate: RequestHandler = async (req, res) => {
    const client = await clientOr404(req);
    const graceSeconds = Number(input(res, regenerateForm).grace_seconds);
    const rotated = await clients.rotateSecret(client.client_id, actorOf(req, res, 'admin_panel'), { graceSeconds });
    const until = rotated.client.previous_secret_expires_at;
    req.session.revealedSecret = {
      client_id: client.client_id, secret: rotated.secret, reason: 'regenerated', previous_until: until ? new Date(until).toISOString() : null,
    };
    res.redirect(303, `/admin/clients/${encodeURIComponent(client.client_id)}`);
  };

  /** A refused registration or edit is shown on the same form, with what was typed, naming the problem. */
  const createFailed = async (err: unknown, req: Request, res: Response, next: (e?: unknown) => void) => {
    if (!(err instanceof AppError) || err.status >= 500 || [401, 403, 429].includes(err.status)) return next(err);
    await renderList(req, res, req.body as ClientFormValues, err);
  };
  const updateFailed = async (err: unknown, req: Request, res: Response, next: (e?: unknown) => void) => {
    if (!(err instanceof AppError) || err.status >= 500 || [401, 403, 404, 429].includes(err.status)) return next(err);
    const client = await clientOr404(req);
    renderDetail(req, res, client, { ...formValuesOf(client), ...(req.body as ClientFormValues) }, err);
  };

  return { list, create, show, update, setActive, confirmRegenerate, regenerate, createFailed, updateFailed };
}
