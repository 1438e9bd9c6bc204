import { html, pageError, redirect } from '../openapi/operation.ts';
import { handlersFrom, route, type Route } from '../routes/declare.ts';
import { auditQuery } from './schemas.ts';
import { userPasskeyParams } from '../passkeys/schemas.ts';
import { activeForm, clientCreateForm, clientForm, confirmForm, linkApproveForm, regenerateForm, userCreateForm, userEditForm, userPasswordForm, webhookEditForm, webhookForm } from './form-schemas.ts';
import { clientPanel } from './panel-clients.ts';
import { backWithError } from './panel-common.ts';
import { linkPanel } from './panel-links.ts';
import { overviewPanel } from './panel-overview.ts';
import { userPanel } from './panel-users.ts';
import { webhookPanel } from './panel-webhooks.ts';

const home = handlersFrom((s) => overviewPanel({ db: s.deps.db, audit: s.audit }));
const clients = handlersFrom((s) => clientPanel(s));
const users = handlersFrom((s) => userPanel(s));
const hooks = handlersFrom((s) => webhookPanel({ db: s.deps.db, webhooks: s.webhooks }));
const links = handlersFrom((s) => linkPanel(s));

/** A panel page about one thing, and the code of the 404 that says it does not exist. */
const client = { path: '/admin/clients/:client_id', missing: 'client_not_found' };
const user = { path: '/admin/users/:id', missing: 'user_not_found' };
const hook = { path: '/admin/webhooks/:id', missing: 'webhook_not_found' };
/** A refused form with nothing to re-render goes back to the page it came from, with the reason (unless that page is gone). */
const back = (page: { path: string; missing: string }) =>
  backWithError((req) => page.path.replace(/:(\w+)/g, (_m, k: string) => encodeURIComponent(String(req.params[k]))), page.missing);
const formDone = (to: string) => ({ 303: redirect(`Done: back to ${to}`), 400: html('The form again with the problem') });
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- each row's schemas type its own handler
const panel = (o: Omit<Route<'page-admin', any, any, any>, 'tag' | 'access' | 'limit'>) => route({ tag: 'Admin panel', access: 'page-admin', limit: 'user', ...o });

/**
 * The admin panel at /admin: server-rendered pages for role admin in a browser session,
 * under the per-user limit of user management. Every answer is no-store (pages show client
 * secrets once); every form is CSRF-checked before it changes anything.
 */
export const ADMIN_PANEL_ROUTES = [
  panel({
    method: 'get', path: '/admin', summary: 'Administration overview', responses: { 200: html('Overview') },
    handle: home.handle((h) => h.overview),
  }),
  panel({
    method: 'get', path: '/admin/audit', summary: 'Audit log page with filters and export', query: auditQuery, queryCheckedByHandler: true, responses: { 200: html('Audit log') },
    handle: home.handle((h) => h.audit),
  }),
  panel({
    method: 'get', path: '/admin/clients', summary: 'Client systems', responses: { 200: html('List') },
    handle: clients.handle((h) => h.list),
  }),
  panel({
    method: 'post', path: '/admin/clients', summary: 'Register a client system (secret shown once)', example: { client_name: 'Shop', callback_url: 'https://shop.example/sso/callback', allowed_ips: '203.0.113.0/24' }, responses: { 200: html('The client\'s page with its secret, shown this once (never kept in the session)'), 400: html('The form again with the problem') },
    bodyType: 'form', body: clientCreateForm,
    handle: clients.handle((h) => h.create),
    onError: clients.onError((h) => h.createFailed),
  }),
  panel({
    method: 'get', path: '/admin/clients/:client_id', summary: 'One client system', responses: { 200: html('Client'), 404: pageError('No such client') },
    handle: clients.handle((h) => h.show),
  }),
  panel({
    method: 'post', path: '/admin/clients/:client_id', summary: 'Change a client system', example: { client_name: 'Shop', callback_url: 'https://shop.example/sso/callback', allowed_ips: '' }, responses: { ...formDone('the client'), 404: pageError('No such client system') },
    bodyType: 'form', body: clientForm,
    handle: clients.handle((h) => h.update),
    onError: clients.onError((h) => h.updateFailed),
  }),
  panel({
    method: 'post', path: '/admin/clients/:client_id/active', summary: 'Activate or deactivate a client system', example: { active: 'false' }, responses: { ...formDone('the client'), 404: pageError('No such client system') },
    bodyType: 'form', body: activeForm,
    handle: clients.handle((h) => h.setActive),
    onError: () => back(client),
  }),
  panel({
    method: 'get', path: '/admin/clients/:client_id/regenerate', summary: 'Confirm regenerating the secret', responses: { 200: html('Confirmation'), 404: pageError('No such client system') },
    handle: clients.handle((h) => h.confirmRegenerate),
  }),
  panel({
    method: 'post', path: '/admin/clients/:client_id/regenerate', summary: 'Regenerate the secret (shown once); `grace_seconds` keeps the old one working that long', example: { grace_seconds: '3600' }, responses: { 200: html('The client\'s page with the new secret, shown this once (never kept in the session)'), 303: redirect('Refused: back to the client, with the reason'), 404: pageError('No such client system') },
    bodyType: 'form', body: regenerateForm,
    handle: clients.handle((h) => h.regenerate),
    onError: () => back(client),
  }),
  panel({
    method: 'get', path: '/admin/users', summary: 'Users', responses: { 200: html('List and search') },
    handle: users.handle((h) => h.list),
  }),
  panel({
    method: 'get', path: '/admin/users/new', summary: 'New user form', responses: { 200: html('Form') },
    handle: users.handle((h) => h.showNew),
  }),
  panel({
    method: 'post', path: '/admin/users', summary: 'Create a user', example: { username: 'bob', email: 'bob@example.com', password: 'a long enough passphrase' }, responses: formDone('the user'),
    bodyType: 'form', body: userCreateForm,
    handle: users.handle((h) => h.create),
    onError: users.onError((h) => h.createFailed),
  }),
  panel({
    method: 'get', path: '/admin/users/:id', summary: 'One user', responses: { 200: html('User'), 404: pageError('No such user') },
    handle: users.handle((h) => h.show),
  }),
  panel({
    method: 'post', path: '/admin/users/:id', summary: 'Change a user\'s profile', example: { email: 'bob@example.com', role: 'user' }, responses: { ...formDone('the user'), 404: pageError('No such user') },
    bodyType: 'form', body: userEditForm,
    handle: users.handle((h) => h.update),
    onError: users.onError((h) => h.updateFailed),
  }),
  panel({
    method: 'post', path: '/admin/users/:id/active', summary: 'Activate or deactivate a user', example: { active: 'true' }, responses: { ...formDone('the user'), 404: pageError('No such user') },
    bodyType: 'form', body: activeForm,
    handle: users.handle((h) => h.setActive),
    onError: () => back(user),
  }),
  panel({
    method: 'post', path: '/admin/users/:id/unlock', summary: 'End a lockout', responses: { ...formDone('the user'), 404: pageError('No such user') },
    bodyType: 'form',
    handle: users.handle((h) => h.unlock),
    onError: () => back(user),
  }),
  panel({
    method: 'post', path: '/admin/users/:id/reset-2fa', summary: 'Turn two-factor authentication off', responses: { ...formDone('the user'), 404: pageError('No such user') },
    bodyType: 'form',
    handle: users.handle((h) => h.resetTwoFactor),
    onError: () => back(user),
  }),
  panel({
    method: 'post', path: '/admin/users/:id/passkeys/:passkeyId/remove', summary: 'Remove one of a user\'s passkeys',
    responses: { ...formDone('the user'), 404: pageError('No such user or passkey') },
    bodyType: 'form', params: userPasskeyParams,
    handle: users.handle((h) => h.removePasskey),
    onError: () => back(user),
  }),
  panel({
    method: 'post', path: '/admin/users/:id/links/:client_id/approve', summary: 'Approve a pending dashboard link (the name shown)', example: { external_username: 'alice.shop' },
    responses: { ...formDone('the user'), 404: pageError('No such user') },
    bodyType: 'form', body: linkApproveForm,
    handle: links.handle((h) => h.approve),
    onError: () => back(user),
  }),
  panel({
    method: 'post', path: '/admin/users/:id/links/:client_id/revoke', summary: 'Revoke a dashboard link', responses: { ...formDone('the user'), 404: pageError('No such user') },
    bodyType: 'form',
    handle: links.handle((h) => h.revoke),
    onError: () => back(user),
  }),
  panel({
    method: 'post', path: '/admin/users/:id/password', summary: 'Set a user\'s password (optionally: must change at the next sign-in)', example: { password: 'temporary but long 2931', must_change: 'on' }, responses: {
      ...formDone('the user'), 404: pageError('No such user'),
      200: html('One\'s own password set, but the session could not be kept (the database went away just after the change): signed out, with a link to sign in again'),
    },
    bodyType: 'form', body: userPasswordForm,
    handle: users.handle((h) => h.setPassword),
    onError: () => back(user),
  }),
  panel({
    method: 'get', path: '/admin/webhooks', summary: 'Webhooks', responses: { 200: html('List and registration form') },
    handle: hooks.handle((h) => h.list),
  }),
  panel({
    method: 'post', path: '/admin/webhooks', summary: 'Register a webhook', example: { url: 'https://shop.example/hooks/auth', secret: 'a-signing-secret-of-16+-chars', events: ['user.login', 'user.locked'] }, responses: formDone('the webhooks'),
    bodyType: 'form', body: webhookForm,
    handle: hooks.handle((h) => h.register),
    onError: hooks.onError((h) => h.registerFailed),
  }),
  panel({
    method: 'get', path: '/admin/webhooks/:id', summary: 'One webhook and its deliveries', responses: { 200: html('Webhook'), 404: pageError('No such webhook') },
    handle: hooks.handle((h) => h.show),
  }),
  panel({
    method: 'post', path: '/admin/webhooks/:id', summary: 'Change a webhook\'s URL, events or secret (an empty secret keeps it)', example: { url: 'https://shop.example/hooks/auth-v2', secret: '', events: ['user.login'] }, responses: { ...formDone('the webhook'), 404: pageError('No such webhook') },
    bodyType: 'form', body: webhookEditForm,
    handle: hooks.handle((h) => h.update),
    onError: (s) => hooks.onError((h) => h.updateFailed(back(hook)))(s),
  }),
  panel({
    method: 'post', path: '/admin/webhooks/:id/active', summary: 'Activate or deactivate a webhook', example: { active: 'false' }, responses: { ...formDone('the webhook'), 404: pageError('No such webhook') },
    bodyType: 'form', body: activeForm,
    handle: hooks.handle((h) => h.setActive),
    onError: () => back(hook),
  }),
  panel({
    method: 'post', path: '/admin/webhooks/:id/delete', summary: 'Delete a webhook (confirmation box)', example: { confirm: 'on' }, responses: { ...formDone('the webhooks'), 404: pageError('No such webhook') },
    bodyType: 'form', body: confirmForm,
    handle: hooks.handle((h) => h.remove),
    onError: () => back(hook),
  }),
  panel({
    method: 'post', path: '/admin/webhooks/:id/deliveries/:delivery/redeliver', summary: 'Send a delivery again', responses: { ...formDone('the webhook'), 404: pageError('No such webhook') },
    bodyType: 'form',
    handle: hooks.handle((h) => h.redeliver),
    onError: () => back(hook),
  }),
];
