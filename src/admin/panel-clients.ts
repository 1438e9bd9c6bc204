import type { Request, RequestHandler, Response } from 'express';
import type { AccessService } from '../access/service.ts';
import type { ClientRecord } from '../clients/client.ts';
import type { ClientService } from '../clients/service.ts';
import { editableValues, toPublicClient } from '../clients/shown.ts';
import { AppError } from '../http/errors.ts';
import { input } from '../http/validate.ts';
import { flashNext } from '../pages/render.ts';
import { actorOf } from '../auth/actor.ts';
import { clientIdParam } from '../http/params.ts';
import { activeForm, clientCreateForm, clientForm, regenerateForm } from './form-schemas.ts';
import { newSubmissionKey, oncePerSubmission } from './once.ts';
import { checked, editedFields, refusedEdit, refusedForm, renderAdmin, splitList } from './panel-common.ts';

type ClientFormValues = {
  client_name: string; callback_url: string; allowed_ips: string; allow_everything?: string; logo_url?: string; initiate_login_uri?: string; client_id?: string;
  redirect_uris?: string; post_logout_redirect_uris?: string; backchannel_logout_uri?: string; public?: string;
};

/** The fields of the edit form, each saved only when the administrator changed it (editedFields). */
const CLIENT_FIELDS = ['client_name', 'callback_url', 'initiate_login_uri', 'allowed_ips', 'logo_url', 'redirect_uris', 'post_logout_redirect_uris', 'backchannel_logout_uri'] as const;
type ClientField = (typeof CLIENT_FIELDS)[number];
const LIST_FIELDS = new Set<ClientField>(['allowed_ips', 'redirect_uris', 'post_logout_redirect_uris']);

/** A shown value as editableValues writes it: a list one entry a line (a browser sends its lines as CRLF), the rest as sent. */
function splitOrKeep(field: ClientField, value: string): string {
  return LIST_FIELDS.has(field) ? splitList(value).join('\n') : value;
}

/** Two values of a field as the service stores them: a list by its entries, the rest trimmed. */
function sameClientValue(field: ClientField, a: string, b: string): boolean {
  return LIST_FIELDS.has(field) ? splitList(a).join(' ') === splitList(b).join(' ') : a.trim() === b.trim();
}

/** A refused URL of the OpenID Connect fields ("redirect_uris: ...") is that field's problem, marked on it. */
function withField(err: unknown): unknown {
  const field = err instanceof AppError && err.code === 'invalid_redirect_uri' ? /^(\w+):/.exec(err.message)?.[1] : undefined;
  return field && err instanceof AppError ? new AppError(err.status, err.code, err.message, { extra: { ...err.extra, field } }) : err;
}

function previousUntilOf(c: ClientRecord): string | null {
  return c.previous_secret_expires_at ? new Date(c.previous_secret_expires_at).toISOString() : null;
}

/**
 * The panel's client-system pages: list, register, detail (edit, activate), regenerate the
 * secret (optionally keeping the old one valid for a grace period).
 */
export function clientPanel(deps: { clients: ClientService; access: AccessService }) {
  const { clients, access } = deps;
  // the forms whose answer shows a new secret, once each (see oncePerSubmission)
  const registerOnce = oncePerSubmission<Awaited<ReturnType<ClientService['createClient']>>>();
  const rotateOnce = oncePerSubmission<Awaited<ReturnType<ClientService['rotateSecret']>>>();

  async function clientOr404(req: Request): Promise<ClientRecord> {
    const client = await clients.findClient(clientIdParam(req));
    if (!client) throw new AppError(404, 'client_not_found', 'There is no client system with this id.');
    return client;
  }

  const renderList = async (req: Request, res: Response, form: Partial<ClientFormValues> = {}, refused?: unknown) => {
    renderAdmin(req, res, 'clients', {
      section: 'clients',
      clients: (await clients.listClients()).map(toPublicClient),
      admitted: await access.admittedCounts(),
      form,
      submission: newSubmissionKey(),
    }, refused === undefined ? {} : refusedForm(refused));
  };

  const renderDetail = async (req: Request, res: Response, client: ClientRecord, form: ClientFormValues, refused?: unknown, shown = editableValues(client)) => {
    renderAdmin(req, res, 'client', {
      section: 'clients', client: toPublicClient(client), form, shown, previousUntil: previousUntilOf(client),
      admitted: (await access.admittedCounts()).get(client.client_id) ?? 0, groups: await access.listGroups(),
    },
      refused === undefined ? {} : refusedForm(refused));
  };

  /**
   * The client's page with a secret just made, as the answer to the POST that made it. Never
   * kept in the session for a redirect: sessions are rows in the database (and in its backups),
   * and a secret is only ever stored hashed. The answer is no-store like every panel answer;
   * `shownAt` lets public/js/admin.js put the client's own address in the history, so a reload
   * is a GET of that page, without the secret, rather than the form sent again.
   */
  const renderRevealed = async (req: Request, res: Response, client: ClientRecord, revealed: { secret: string; reason: 'created' | 'regenerated'; previous_until?: string | null }) => {
    const saved = editableValues(client);
    renderAdmin(req, res, 'client', {
      section: 'clients', client: toPublicClient(client), form: saved, shown: saved, previousUntil: previousUntilOf(client),
      admitted: (await access.admittedCounts()).get(client.client_id) ?? 0, groups: await access.listGroups(),
      revealed, shownAt: `/admin/clients/${encodeURIComponent(client.client_id)}`,
    });
  };

  const list: RequestHandler = (req, res) => renderList(req, res);

  const create: RequestHandler = async (req, res) => {
    const form = input(res, clientCreateForm);
    const { client, secret } = await registerOnce(req, form, () => clients.createClient({
      name: form.client_name,
      // blank: made from the name, as the CLI without --id
      clientId: form.client_id === '' ? undefined : form.client_id,
      callbackUrl: form.callback_url,
      allowedIps: splitList(form.allowed_ips),
      allowEverything: checked(form.allow_everything),
      logoUrl: form.logo_url,
      initiateLoginUri: form.initiate_login_uri,
      redirectUris: splitList(form.redirect_uris),
      postLogoutRedirectUris: splitList(form.post_logout_redirect_uris),
      backchannelLogoutUri: form.backchannel_logout_uri.trim() === '' ? null : form.backchannel_logout_uri.trim(),
      public: checked(form.public),
    }, actorOf(req, res, 'admin_panel')));
    // a public client has no secret: none is shown (as the API's answer has none)
    if (client.public) {
      flashNext(req, { type: 'success', text: `${client.client_name} is registered as a public client: it has no secret.` });
      res.redirect(303, `/admin/clients/${encodeURIComponent(client.client_id)}`);
      return;
    }
    await renderRevealed(req, res, client, { secret, reason: 'created' });
  };

  const show: RequestHandler = async (req, res) => {
    const client = await clientOr404(req);
    await renderDetail(req, res, client, editableValues(client));
  };

  const update: RequestHandler = async (req, res) => {
    const clientId = clientIdParam(req);
    const form = input(res, clientForm);
    const typed = Object.fromEntries(CLIENT_FIELDS.map((f) => [f, form[f]])) as Record<ClientField, string>;
    const edited = new Set(editedFields(CLIENT_FIELDS, typed, form, sameClientValue));
    const shown = Object.fromEntries(CLIENT_FIELDS.flatMap((f) => (edited.has(f) && form[`was_${f}`] !== undefined ? [[f, splitOrKeep(f, form[`was_${f}`]!)]] : [])));
    await clients.updateClient(clientId, {
      clientName: edited.has('client_name') ? form.client_name : undefined,
      callbackUrl: edited.has('callback_url') ? form.callback_url : undefined,
      allowedIps: edited.has('allowed_ips') ? splitList(form.allowed_ips) : undefined,
      allowEverything: checked(form.allow_everything),
      logoUrl: edited.has('logo_url') ? form.logo_url : undefined,
      initiateLoginUri: edited.has('initiate_login_uri') ? form.initiate_login_uri : undefined,
      redirectUris: edited.has('redirect_uris') ? splitList(form.redirect_uris) : undefined,
      postLogoutRedirectUris: edited.has('post_logout_redirect_uris') ? splitList(form.post_logout_redirect_uris) : undefined,
      backchannelLogoutUri: edited.has('backchannel_logout_uri') ? (form.backchannel_logout_uri.trim() === '' ? null : form.backchannel_logout_uri.trim()) : undefined,
    }, actorOf(req, res, 'admin_panel'), shown);
    flashNext(req, { type: 'success', text: 'The client system was saved. The allow list applies to the next request.' });
    res.redirect(303, `/admin/clients/${encodeURIComponent(clientId)}`);
  };

  const setActive: RequestHandler = async (req, res) => {
    const client = await clientOr404(req);
    const active = input(res, activeForm).active === 'true';
    await clients.updateClient(client.client_id, { active }, actorOf(req, res, 'admin_panel'));
    flashNext(req, { type: 'success', text: active ? `${client.client_name} is active again.` : `${client.client_name} is deactivated: its credentials no longer work.` });
    res.redirect(303, `/admin/clients/${encodeURIComponent(client.client_id)}`);
  };

  const confirmRegenerate: RequestHandler = async (req, res) => {
    renderAdmin(req, res, 'client-regenerate', { section: 'clients', client: toPublicClient(await clientOr404(req)), submission: newSubmissionKey() });
  };

  const regenerate: RequestHandler = async (req, res) => {
    const client = await clientOr404(req);
    const form = input(res, regenerateForm);
    const graceSeconds = Number(form.grace_seconds);
    const rotated = await rotateOnce(req, form, () => clients.rotateSecret(client.client_id, actorOf(req, res, 'admin_panel'), { graceSeconds }));
    await renderRevealed(req, res, rotated.client, { secret: rotated.secret, reason: 'regenerated', previous_until: previousUntilOf(rotated.client) });
  };

  /** A refused registration or edit is shown on the same form, with what was typed, naming the problem. */
  const createFailed = async (err: unknown, req: Request, res: Response, next: (e?: unknown) => void) => {
    if (!(err instanceof AppError) || err.status >= 500 || [401, 403, 429].includes(err.status)) return next(err);
    const posted = req.body as ClientFormValues;
    // an id chosen on the form that is taken is that field's problem (one made from the name, the name's)
    const chosenId = typeof posted.client_id === 'string' && posted.client_id.trim() !== '';
    await renderList(req, res, posted, chosenId && err.code === 'client_exists' ? new AppError(err.status, err.code, err.message, { extra: { field: 'client_id' } }) : withField(err));
  };
  const updateFailed = async (err: unknown, req: Request, res: Response, next: (e?: unknown) => void) => {
    if (!(err instanceof AppError) || err.status >= 500 || [401, 403, 404, 429].includes(err.status)) return next(err);
    const client = await clientOr404(req);
    const posted = req.body as Record<string, unknown>;
    const { form, shown } = refusedEdit(CLIENT_FIELDS, posted, editableValues(client), err, sameClientValue);
    await renderDetail(req, res, client, { ...form, allow_everything: typeof posted.allow_everything === 'string' ? posted.allow_everything : undefined }, withField(err), shown);
  };

  return { list, create, show, update, setActive, confirmRegenerate, regenerate, createFailed, updateFailed };
}
