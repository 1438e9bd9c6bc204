import { activeForm, clientForm, confirmForm, regenerateForm, userCreateForm, userEditForm, userPasswordForm, webhookEditForm, webhookForm } from '../admin/form-schemas.ts';
import { auditQuery, createClientSchema, createUserSchema, rotateSecretSchema, searchUsersQuery, updateClientSchema, updateUserSchema } from '../admin/schemas.ts';
import { err, forbidden, html, invalid, limited, type Operation, redirect, unauthenticated } from './operation.ts';
import * as R from './responses.ts';

const guarded = { 401: unauthenticated, 403: forbidden, 429: limited };
const noClient = err('No such client', { error: 'client_not_found', message: 'No client shop' });
const noUser = err('No such user');
const client = {
  client_id: 'shop', client_name: 'Shop', client_secret: '••••••••Xy3Q', callback_url: 'https://shop.example/sso/callback',
  allowed_ips: ['203.0.113.0/24'], logo_url: '/assets/logos/shop.svg', active: true, created_at: '2026-01-31T12:00:00.000Z', updated_at: '2026-01-31T12:00:00.000Z',
  previous_secret_expires_at: null,
};
const adminUser = {
  id: 7, username: 'alice', email: 'alice@example.com', role: 'user', full_name: 'Alice Example', active: true,
  locked_until: null, totp_enabled: false, must_change_password: false, created_at: '2026-01-31T12:00:00.000Z',
};
const api = (o: Omit<Operation, 'tag' | 'access' | 'limit'>): Operation => ({ tag: 'Administration', access: 'admin', limit: 'user', ...o });
const panel = (o: Omit<Operation, 'tag' | 'access' | 'limit'>): Operation => ({ tag: 'Admin panel', access: 'page', limit: 'user', ...o });
const formDone = (to: string) => ({ 303: redirect(`Done: back to ${to}`), 400: html('The form again with the problem'), 403: html('Missing or wrong CSRF token, or not an administrator') });

/** The admin JSON API and the admin panel pages (DESIGN.md "Admin API"). */
export const ADMIN_OPERATIONS: Operation[] = [
  api({ method: 'get', path: '/api/admin/clients', summary: 'List client systems (secrets masked)', responses: { 200: { description: 'All clients', schema: R.publicClient.array(), example: [client] }, ...guarded } }),
  api({
    method: 'post', path: '/api/admin/clients', summary: 'Register a client system; the secret is in this answer only',
    description: 'Emits client.registered. `allow_everything` confirms an allow-everything range such as `0.0.0.0/0`.',
    body: createClientSchema,
    example: { client_name: 'Shop', callback_url: 'https://shop.example/sso/callback', allowed_ips: ['203.0.113.0/24'] },
    responses: { 201: { description: 'Registered', schema: R.createdClient, example: { ...client, client_secret: 'kq3vZl0b5H3o0f7J9yVwz2mQn8xR1tUe4sAa6dCc' } }, 400: invalid, 409: err('client_id taken'), ...guarded },
  }),
  api({ method: 'get', path: '/api/admin/clients/:client_id', summary: 'One client system', responses: { 200: { description: 'The client', schema: R.publicClient, example: client }, 404: noClient, ...guarded } }),
  api({
    method: 'patch', path: '/api/admin/clients/:client_id', summary: 'Change a client system (name, callback URL, allowed IPs, logo, active)',
    description: '`logo_url`: a path under /assets or a data:image/...;base64, URL (no other site is ever contacted); null or "" removes it.',
    body: updateClientSchema,
    example: { allowed_ips: ['203.0.113.0/24', '2001:db8::/32'], active: true },
    responses: { 200: { description: 'The changed client', schema: R.publicClient, example: client }, 400: invalid, 404: noClient, ...guarded },
  }),
  api({
    method: 'post', path: '/api/admin/clients/:client_id/rotate-secret', summary: 'Regenerate the client secret, optionally keeping the old one valid for a grace period',
    description: 'The body may be empty. `grace_seconds` (0 to 2592000, default 0) keeps the replaced secret working that long, so the client system can be reconfigured without an outage; with 0 the old secret fails at once. Only one previous secret is kept: a rotation with a grace while an earlier grace runs is refused with 409 `rotation_in_progress`; one without a grace ends it. Audited with the grace.',
    body: rotateSecretSchema,
    bodyOptional: true,
    example: { grace_seconds: 3600 },
    responses: {
      200: { description: 'The new secret, shown this once', schema: R.rotatedSecret, example: { client_id: 'shop', client_secret: 'pN4x0c2s9W1yQe6rT3uV8zA5bD7fG1hJ2kL4mN6oP8q', previous_secret_expires_at: '2026-01-31T13:00:00.000Z' } },
      400: invalid, 404: noClient, 409: err('A grace is still running (rotation_in_progress)'), ...guarded,
    },
  }),
  api({ method: 'get', path: '/api/admin/users', summary: 'Search users by username, email or full name', query: searchUsersQuery, responses: { 200: { description: 'Matching users', schema: R.adminUser.array(), example: [adminUser] }, 400: invalid, ...guarded } }),
  api({
    method: 'post', path: '/api/admin/users', summary: 'Create a user',
    body: createUserSchema,
    example: { username: 'bob', email: 'bob@example.com', password: 'a long enough passphrase', role: 'user', full_name: 'Bob Example' },
    responses: { 201: { description: 'Created', schema: R.adminUser, example: { ...adminUser, id: 8, username: 'bob', email: 'bob@example.com', full_name: 'Bob Example' } }, 400: invalid, 409: err('Username taken'), ...guarded },
  }),
  api({ method: 'get', path: '/api/admin/users/:id', summary: 'One user, with the client systems linked on the dashboard', responses: { 200: { description: 'The user', schema: R.adminUserDetail, example: { ...adminUser, linked_clients: [] } }, 404: noUser, ...guarded } }),
  api({
    method: 'patch', path: '/api/admin/users/:id', summary: 'Change a user (email, full name, role, active, password, must-change)',
    description: '`password` sets a new password (the password policy applies: `400 invalid_password` says what to fix); with `must_change_password: true` the next sign-in must choose another one (API logins answer `403 password_change_required`). A new password or `must_change_password: true` signs the user out everywhere (sessions, access tokens, unused SSO tokens; user.logout) and is audited as user.password_set; the password is never logged.',
    body: updateUserSchema,
    example: { password: 'temporary but long 2931', must_change_password: true },
    responses: { 200: { description: 'The changed user', schema: R.adminUser, example: { ...adminUser, must_change_password: true } }, 400: invalid, 404: noUser, ...guarded },
  }),
  api({ method: 'post', path: '/api/admin/users/:id/unlock', summary: 'End a lockout now', responses: { 200: { description: 'The user', schema: R.adminUser, example: adminUser }, 404: noUser, ...guarded } }),
  api({ method: 'post', path: '/api/admin/users/:id/reset-2fa', summary: 'Turn a user\'s two-factor authentication off', responses: { 200: { description: 'The user', schema: R.adminUser, example: adminUser }, 404: noUser, ...guarded } }),
  api({
    method: 'get', path: '/api/admin/audit', summary: 'The audit log: a page of JSON, or the filtered log streamed as CSV or NDJSON',
    description: 'Filters: `user` (id or username), `client_id`, `action`, `outcome`, `ip`, `from`/`to` (ISO date or date-time, `to` exclusive). `format=json` pages with `limit` and `cursor` (the previous `next_cursor`); `csv` and `ndjson` stream everything that matches as a download.',
    query: auditQuery,
    responses: {
      200: { description: 'Newest first', schema: R.auditPage, example: { entries: [{ id: 42, at: '2026-01-31T12:00:00.000Z', action: 'token.issue', outcome: 'success', user_id: 7, username: 'alice', client_id: 'shop', ip_address: '203.0.113.9', user_agent: 'curl/8', details: { jti: '9b1f…' } }], next_cursor: null } },
      400: invalid, ...guarded,
    },
  }),

  panel({ method: 'get', path: '/admin', summary: 'Administration overview', responses: { 200: html('Overview') } }),
  panel({ method: 'get', path: '/admin/audit', summary: 'Audit log page with filters and export', query: auditQuery, responses: { 200: html('Audit log') } }),
  panel({ method: 'get', path: '/admin/clients', summary: 'Client systems', responses: { 200: html('List') } }),
  panel({ method: 'post', path: '/admin/clients', summary: 'Register a client system (secret shown once)', bodyType: 'form', body: clientForm, example: { client_name: 'Shop', callback_url: 'https://shop.example/sso/callback', allowed_ips: '203.0.113.0/24' }, responses: { 200: html('The new secret, shown once'), ...formDone('the client') } }),
  panel({ method: 'get', path: '/admin/clients/:client_id', summary: 'One client system', responses: { 200: html('Client'), 404: html('No such client') } }),
  panel({ method: 'post', path: '/admin/clients/:client_id', summary: 'Change a client system', bodyType: 'form', body: clientForm, example: { client_name: 'Shop', callback_url: 'https://shop.example/sso/callback', allowed_ips: '' }, responses: formDone('the client') }),
  panel({ method: 'post', path: '/admin/clients/:client_id/active', summary: 'Activate or deactivate a client system', bodyType: 'form', body: activeForm, example: { active: 'false' }, responses: formDone('the client') }),
  panel({ method: 'get', path: '/admin/clients/:client_id/regenerate', summary: 'Confirm regenerating the secret', responses: { 200: html('Confirmation') } }),
  panel({ method: 'post', path: '/admin/clients/:client_id/regenerate', summary: 'Regenerate the secret (shown once); `grace_seconds` keeps the old one working that long', bodyType: 'form', body: regenerateForm, example: { grace_seconds: '3600' }, responses: { 200: html('The new secret, shown once'), ...formDone('the client') } }),
  panel({ method: 'get', path: '/admin/users', summary: 'Users', responses: { 200: html('List and search') } }),
  panel({ method: 'get', path: '/admin/users/new', summary: 'New user form', responses: { 200: html('Form') } }),
  panel({ method: 'post', path: '/admin/users', summary: 'Create a user', bodyType: 'form', body: userCreateForm, example: { username: 'bob', email: 'bob@example.com', password: 'a long enough passphrase' }, responses: formDone('the user') }),
  panel({ method: 'get', path: '/admin/users/:id', summary: 'One user', responses: { 200: html('User'), 404: html('No such user') } }),
  panel({ method: 'post', path: '/admin/users/:id', summary: 'Change a user\'s profile', bodyType: 'form', body: userEditForm, example: { email: 'bob@example.com', role: 'user' }, responses: formDone('the user') }),
  panel({ method: 'post', path: '/admin/users/:id/active', summary: 'Activate or deactivate a user', bodyType: 'form', body: activeForm, example: { active: 'true' }, responses: formDone('the user') }),
  panel({ method: 'post', path: '/admin/users/:id/unlock', summary: 'End a lockout', bodyType: 'form', responses: formDone('the user') }),
  panel({ method: 'post', path: '/admin/users/:id/password', summary: 'Set a user\'s password (optionally: must change at the next sign-in)', bodyType: 'form', body: userPasswordForm, example: { password: 'temporary but long 2931', must_change: 'on' }, responses: formDone('the user') }),
  panel({ method: 'post', path: '/admin/users/:id/reset-2fa', summary: 'Turn two-factor authentication off', bodyType: 'form', responses: formDone('the user') }),
  panel({ method: 'get', path: '/admin/webhooks', summary: 'Webhooks', responses: { 200: html('List and registration form') } }),
  panel({ method: 'post', path: '/admin/webhooks', summary: 'Register a webhook', bodyType: 'form', body: webhookForm, example: { url: 'https://shop.example/hooks/auth', secret: 'a-signing-secret-of-16+-chars', events: ['user.login', 'user.locked'] }, responses: formDone('the webhooks') }),
  panel({ method: 'get', path: '/admin/webhooks/:id', summary: 'One webhook and its deliveries', responses: { 200: html('Webhook'), 404: html('No such webhook') } }),
  panel({ method: 'post', path: '/admin/webhooks/:id', summary: 'Change a webhook\'s URL, events or secret (an empty secret keeps it)', bodyType: 'form', body: webhookEditForm, example: { url: 'https://shop.example/hooks/auth-v2', secret: '', events: ['user.login'] }, responses: formDone('the webhook') }),
  panel({ method: 'post', path: '/admin/webhooks/:id/active', summary: 'Activate or deactivate a webhook', bodyType: 'form', body: activeForm, example: { active: 'false' }, responses: formDone('the webhook') }),
  panel({ method: 'post', path: '/admin/webhooks/:id/delete', summary: 'Delete a webhook (confirmation box)', bodyType: 'form', body: confirmForm, example: { confirm: 'on' }, responses: formDone('the webhooks') }),
  panel({ method: 'post', path: '/admin/webhooks/:id/deliveries/:delivery/redeliver', summary: 'Send a delivery again', bodyType: 'form', responses: formDone('the webhook') }),
];
