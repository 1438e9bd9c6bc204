import { type RequestHandler, Router } from 'express';
import type { ClientService } from '../clients/service.ts';
import type { Db } from '../db/db.ts';
import type { LinkService } from '../links/service.ts';
import { noStore } from '../http/no-store.ts';
import { validateBody } from '../http/validate.ts';
import { requireCsrf } from '../pages/csrf.ts';
import type { WebhookService } from '../webhooks/service.ts';
import { activeForm, clientForm, confirmForm, regenerateForm, userCreateForm, userEditForm, userPasswordForm, webhookEditForm, webhookForm } from './form-schemas.ts';
import { clientPanel } from './panel-clients.ts';
import { linkPanel } from './panel-links.ts';
import { adminFormBody as form, backWithError, requireAdminPage as admin } from './panel-common.ts';
import { overviewPanel } from './panel-overview.ts';
import { userPanel } from './panel-users.ts';
import { webhookPanel } from './panel-webhooks.ts';
import type { UserAdmin } from './users.ts';

/**
 * The admin panel at /admin: server-rendered pages for role admin in a browser session,
 * under the per-user limit of user management. Every answer is no-store (pages show client
 * secrets once); every form is CSRF-checked before it changes anything.
 */
export function adminPanelRoutes(deps: { db: Db; clients: ClientService; userAdmin: UserAdmin; webhooks: WebhookService; links: LinkService; userLimit: RequestHandler }): Router {
  const { userLimit: limit } = deps;
  const home = overviewPanel(deps);
  const clients = clientPanel(deps);
  const users = userPanel(deps);
  const hooks = webhookPanel(deps);
  const links = linkPanel(deps);
  const client = '/admin/clients/:client_id';
  const user = '/admin/users/:id';
  const hook = '/admin/webhooks/:id';
  const back = (path: string) => backWithError((req) => path.replace(/:(\w+)/g, (_m, k: string) => encodeURIComponent(String(req.params[k]))));
  const r = Router();

  r.get('/admin', noStore, limit, admin, home.overview);
  r.get('/admin/audit', noStore, limit, admin, home.audit);

  r.get('/admin/clients', noStore, limit, admin, clients.list);
  r.post('/admin/clients', noStore, form, limit, admin, requireCsrf, validateBody(clientForm), clients.create, clients.createFailed);
  r.get(client, noStore, limit, admin, clients.show);
  r.post(client, noStore, form, limit, admin, requireCsrf, validateBody(clientForm), clients.update, clients.updateFailed);
  r.post(`${client}/active`, noStore, form, limit, admin, requireCsrf, validateBody(activeForm), clients.setActive, back(client));
  r.get(`${client}/regenerate`, noStore, limit, admin, clients.confirmRegenerate);
  r.post(`${client}/regenerate`, noStore, form, limit, admin, requireCsrf, validateBody(regenerateForm), clients.regenerate, back(client));

  r.get('/admin/users', noStore, limit, admin, users.list);
  r.get('/admin/users/new', noStore, limit, admin, users.showNew);
  r.post('/admin/users', noStore, form, limit, admin, requireCsrf, validateBody(userCreateForm), users.create, users.createFailed);
  r.get(user, noStore, limit, admin, users.show);
  r.post(user, noStore, form, limit, admin, requireCsrf, validateBody(userEditForm), users.update, users.updateFailed);
  r.post(`${user}/active`, noStore, form, limit, admin, requireCsrf, validateBody(activeForm), users.setActive, back(user));
  r.post(`${user}/unlock`, noStore, form, limit, admin, requireCsrf, users.unlock, back(user));
  r.post(`${user}/reset-2fa`, noStore, form, limit, admin, requireCsrf, users.resetTwoFactor, back(user));
  r.post(`${user}/links/:client_id/approve`, noStore, form, limit, admin, requireCsrf, links.approve, back(user));
  r.post(`${user}/links/:client_id/revoke`, noStore, form, limit, admin, requireCsrf, links.revoke, back(user));
  r.post(`${user}/password`, noStore, form, limit, admin, requireCsrf, validateBody(userPasswordForm), users.setPassword, back(user));

  r.get('/admin/webhooks', noStore, limit, admin, hooks.list);
  r.post('/admin/webhooks', noStore, form, limit, admin, requireCsrf, validateBody(webhookForm), hooks.register, hooks.registerFailed);
  r.get(hook, noStore, limit, admin, hooks.show);
  r.post(hook, noStore, form, limit, admin, requireCsrf, validateBody(webhookEditForm), hooks.update, back(hook));
  r.post(`${hook}/active`, noStore, form, limit, admin, requireCsrf, validateBody(activeForm), hooks.setActive, back(hook));
  r.post(`${hook}/delete`, noStore, form, limit, admin, requireCsrf, validateBody(confirmForm), hooks.remove, back(hook));
  r.post(`${hook}/deliveries/:delivery/redeliver`, noStore, form, limit, admin, requireCsrf, hooks.redeliver, back(hook));
  return r;
}
