import type { RequestHandler } from 'express';
import { z } from 'zod';
import type { AccessService } from '../access/service.ts';
import type { ClientService } from '../clients/service.ts';
import { input } from '../http/validate.ts';
import { html, pageError, redirect } from '../openapi/operation.ts';
import { flashNext } from '../pages/render.ts';
import { handlersFrom, route, type Route } from '../routes/declare.ts';
import { actorOf } from '../auth/actor.ts';
import { clientIdParam, idParam } from '../http/params.ts';
import { backWithError, checked, renderAdmin, splitList } from './panel-common.ts';

const text = (max: number) => z.string().max(max);
/** The access form of a client's page (docs/access.md): names separated by spaces, commas or lines. */
export const clientAccessForm = z.object({ allow_groups: text(4000).default(''), allow_roles: text(4000).default(''), listed: z.string().max(10).optional() });
export const groupForm = z.object({ group: text(100).min(1, 'Choose a group') });
export const groupCreateForm = z.object({ name: text(100).min(1, 'Enter a name') });

const groupParam = (req: Parameters<RequestHandler>[0]) => String(req.params.name).slice(0, 100);

/** The panel's access pages: groups, a client's rule, a user's groups. Every change audited by the services. */
export function accessPanel(deps: { access: AccessService; clients: ClientService }) {
  const { access, clients } = deps;

  const groups: RequestHandler = async (req, res) => {
    renderAdmin(req, res, 'groups', { section: 'groups', groups: await access.listGroups() });
  };
  const createGroup: RequestHandler = async (req, res) => {
    const created = await access.createGroup(input(res, groupCreateForm).name, actorOf(req, res, 'admin_panel'));
    flashNext(req, { type: 'success', text: `Group ${created.name} was created.` });
    res.redirect(303, '/admin/groups');
  };
  const deleteGroup: RequestHandler = async (req, res) => {
    const gone = await access.deleteGroup(groupParam(req), actorOf(req, res, 'admin_panel'));
    flashNext(req, { type: 'success', text: `Group ${gone.name} was deleted (${gone.members} member(s) taken out).` });
    res.redirect(303, '/admin/groups');
  };
  const setClientAccess: RequestHandler = async (req, res) => {
    const clientId = clientIdParam(req);
    const form = input(res, clientAccessForm);
    const client = await clients.updateClient(clientId, {
      allowGroups: splitList(form.allow_groups), allowRoles: splitList(form.allow_roles), listed: checked(form.listed),
    }, actorOf(req, res, 'admin_panel'));
    const open = client.allow_groups.length + client.allow_roles.length === 0;
    flashNext(req, { type: 'success', text: `Saved: ${client.client_name} is open to ${open ? 'every active user' : 'the groups and roles named'}, at once on every instance.` });
    res.redirect(303, `/admin/clients/${encodeURIComponent(clientId)}`);
  };
  const membership = (add: boolean): RequestHandler => async (req, res) => {
    const id = idParam(req);
    const name = input(res, groupForm).group;
    const r = add ? await access.addToGroup(id, name, actorOf(req, res, 'admin_panel')) : await access.removeFromGroup(id, name, actorOf(req, res, 'admin_panel'));
    flashNext(req, { type: 'success', text: add ? `${r.username} is in ${r.group}.` : `${r.username} is no longer in ${r.group}.` });
    res.redirect(303, `/admin/users/${id}`);
  };
  return { groups, createGroup, deleteGroup, setClientAccess, addMember: membership(true), removeMember: membership(false) };
}

const handlers = handlersFrom((s) => accessPanel(s));
const formDone = (to: string) => ({ 303: redirect(`Done: back to ${to}`) });
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- each row's schemas type its own handler
const panel = (o: Omit<Route<'page-admin', any, any, any>, 'tag' | 'access' | 'limit'>) => route({ tag: 'Admin panel', access: 'page-admin', limit: 'user', ...o });
const back = (to: (req: Parameters<RequestHandler>[0]) => string, missing: string) => () => backWithError(to, missing);

/** The panel's access routes (docs/access.md). */
export const ACCESS_PANEL_ROUTES = [
  panel({
    method: 'get', path: '/admin/groups', summary: 'Groups', responses: { 200: html('Groups with their members') },
    handle: handlers.handle((h) => h.groups),
  }),
  panel({
    method: 'post', path: '/admin/groups', summary: 'Create a group', example: { name: 'finance' }, responses: formDone('the groups'),
    bodyType: 'form', body: groupCreateForm,
    handle: handlers.handle((h) => h.createGroup),
    onError: back(() => '/admin/groups', 'none'),
  }),
  panel({
    method: 'post', path: '/admin/groups/:name/delete', summary: 'Delete a group (refused while a client\'s rule names it)', responses: { ...formDone('the groups'), 404: pageError('No such group') },
    bodyType: 'form',
    handle: handlers.handle((h) => h.deleteGroup),
    onError: back(() => '/admin/groups', 'group_not_found'),
  }),
  panel({
    method: 'post', path: '/admin/clients/:client_id/access', summary: 'Set who may use a client system, and whether the launcher lists it',
    example: { allow_groups: 'finance', allow_roles: '', listed: 'on' }, responses: { ...formDone('the client'), 404: pageError('No such client system') },
    bodyType: 'form', body: clientAccessForm,
    handle: handlers.handle((h) => h.setClientAccess),
    onError: back((req) => `/admin/clients/${encodeURIComponent(String(req.params.client_id))}`, 'client_not_found'),
  }),
  panel({
    method: 'post', path: '/admin/users/:id/groups', summary: 'Put a user in a group', example: { group: 'finance' }, responses: { ...formDone('the user'), 404: pageError('No such user') },
    bodyType: 'form', body: groupForm,
    handle: handlers.handle((h) => h.addMember),
    onError: back((req) => `/admin/users/${encodeURIComponent(String(req.params.id))}`, 'user_not_found'),
  }),
  panel({
    method: 'post', path: '/admin/users/:id/groups/remove', summary: 'Take a user out of a group', example: { group: 'finance' }, responses: { ...formDone('the user'), 404: pageError('No such user') },
    bodyType: 'form', body: groupForm,
    handle: handlers.handle((h) => h.removeMember),
    onError: back((req) => `/admin/users/${encodeURIComponent(String(req.params.id))}`, 'user_not_found'),
  }),
];
