import type { Request, Response } from 'express';
import { z } from 'zod';
import { toPublicClient } from '../clients/shown.ts';
import { AppError } from '../http/errors.ts';
import { err, forbidden, invalid, limited, unauthenticated } from '../openapi/operation.ts';
import * as R from '../openapi/responses.ts';
import { route } from '../routes/declare.ts';
import { actorOf } from '../auth/actor.ts';
import { clientIdParam, POSITIVE_ID } from '../http/params.ts';
import { auditFilterOf, auditQuery, createClientSchema, createUserSchema, rotateSecretSchema, searchUsersQuery, updateClientSchema, updateUserSchema } from './schemas.ts';

const isoOrNull = (v: Date | string | null) => (v === null ? null : new Date(v).toISOString());

const guarded = { 401: unauthenticated, 403: forbidden, 429: limited };
const badId = err('Malformed user id', { error: 'invalid_id', message: 'The id must be a positive integer' });
const noClient = err('No such client', { error: 'client_not_found', message: 'No client shop' });
const noUser = err('No such user', { error: 'user_not_found', message: 'No user 7' });
const badAllowList = err('Invalid body (`validation_error` with `details`), or allow-list entries that are not addresses or ranges (`invalid_allowed_ips` with `invalid`), or an allow-everything range not confirmed (`allow_everything_unconfirmed` with `entries`), or a callback, initiate-login or logo URL refused (`invalid_callback_url`, `invalid_initiate_login_uri`, `invalid_logo_url`)',
  { error: 'validation_error', message: 'The request body is invalid', details: [{ path: 'callback_url', message: 'Invalid URL' }] });
const client = {
  client_id: 'shop', client_name: 'Shop', client_secret: '••••••••Xy3Q', callback_url: 'https://shop.example/sso/callback', initiate_login_uri: 'https://shop.example/sso/start',
  redirect_uris: [], post_logout_redirect_uris: [], public: false, backchannel_logout_uri: null,
  allowed_ips: ['203.0.113.0/24'], logo_url: '/assets/logos/shop.svg', active: true, created_at: '2026-01-31T12:00:00.000Z', updated_at: '2026-01-31T12:00:00.000Z',
  previous_secret_expires_at: null, allow_groups: [], allow_roles: [], listed: true,
};
const adminUser = {
  id: 7, username: 'alice', email: 'alice@example.com', role: 'user', full_name: 'Alice Example', active: true,
  locked_until: null, totp_enabled: false, must_change_password: false, created_at: '2026-01-31T12:00:00.000Z',
};
/** `:id` of a user: a positive integer; anything else is 400 invalid_id before the body is looked at. */
const userId = z.object({ id: z.string().regex(POSITIVE_ID).transform(Number) });
const api = (req: Request, res: Response) => actorOf(req, res, 'admin_api');
const admin = { tag: 'Administration', access: 'admin', limit: 'user' } as const;

/**
 * The admin JSON API (docs/administration.md): client systems, users and the audit log, for
 * role admin by session or bearer access token, under the per-user limit of user management.
 */
export const ADMIN_API_ROUTES = [
  route({
    ...admin, method: 'get', path: '/api/admin/clients', summary: 'List client systems (secrets masked)',
    responses: { 200: { description: 'All clients', schema: R.publicClient.array(), example: [client] }, ...guarded },
    handle: ({ clients }) => async ({ res }) => {
      res.json((await clients.listClients()).map(toPublicClient));
    },
  }),
  route({
    ...admin, method: 'post', path: '/api/admin/clients', summary: 'Register a client system; the secret is in this answer only',
    description: 'Emits client.registered. `allow_everything` confirms an allow-everything range such as `0.0.0.0/0`.',
    body: createClientSchema,
    example: { client_name: 'Shop', callback_url: 'https://shop.example/sso/callback', allowed_ips: ['203.0.113.0/24'] },
    responses: {
      201: { description: 'Registered', schema: R.createdClient, example: { ...client, client_secret: 'kq3vZl0b5H3o0f7J9yVwz2mQn8xR1tUe4sAa6dCc' } },
      400: badAllowList, 409: err('client_id taken', { error: 'client_exists', message: 'Client shop already exists' }), ...guarded,
    },
    handle: ({ clients }) => async ({ req, res, body }) => {
      const { client: created, secret } = await clients.createClient({
        name: body.client_name, callbackUrl: body.callback_url, allowedIps: body.allowed_ips, clientId: body.client_id, allowEverything: body.allow_everything, logoUrl: body.logo_url,
        initiateLoginUri: body.initiate_login_uri,
        redirectUris: body.redirect_uris, postLogoutRedirectUris: body.post_logout_redirect_uris, backchannelLogoutUri: body.backchannel_logout_uri, public: body.public,
        allowGroups: body.allow_groups, allowRoles: body.allow_roles, listed: body.listed,
      }, api(req, res));
      res.status(201).json(created.public ? toPublicClient(created) : { ...toPublicClient(created), client_secret: secret });
    },
  }),
  route({
    ...admin, method: 'get', path: '/api/admin/clients/:client_id', summary: 'One client system',
    description: '`admitted_users`: how many active users its access rule admits now (docs/access.md).',
    responses: { 200: { description: 'The client', schema: R.clientDetail, example: { ...client, admitted_users: 12 } }, 404: noClient, ...guarded },
    handle: ({ clients, access }) => async ({ req, res }) => {
      const clientId = clientIdParam(req);
      const found = await clients.findClient(clientId);
      if (!found) throw new AppError(404, 'client_not_found', `No client ${clientId}`);
      res.json({ ...toPublicClient(found), admitted_users: (await access.admittedCounts()).get(clientId) ?? 0 });
    },
  }),
  route({
    ...admin, method: 'patch', path: '/api/admin/clients/:client_id', summary: 'Change a client system (name, callback URL, initiate-login URL, allowed IPs, logo, active, access rule, listing, OpenID Connect fields)',
    description: '`allow_groups` / `allow_roles`: who may use it (docs/access.md), each replacing that list; both `[]`: every active user. A group that does not exist is 400 `invalid_client` naming it. `listed: false` hides it from the dashboard\'s launcher. '
      + '`logo_url`: a path under /assets or a data:image/...;base64, URL (no other site is ever contacted); null or "" removes it. `initiate_login_uri`: where the dashboard\'s one-click sign-in sends the browser so the client starts its own sign-in (docs/sdk.md); null or "" removes it.',
    body: updateClientSchema,
    example: { allowed_ips: ['203.0.113.0/24', '2001:db8::/32'], active: true },
    responses: { 200: { description: 'The changed client', schema: R.publicClient, example: client }, 400: badAllowList, 404: noClient, ...guarded },
    handle: ({ clients }) => async ({ req, res, body }) => {
      const changed = await clients.updateClient(clientIdParam(req), {
        clientName: body.client_name, callbackUrl: body.callback_url, allowedIps: body.allowed_ips, active: body.active, allowEverything: body.allow_everything, logoUrl: body.logo_url,
        initiateLoginUri: body.initiate_login_uri,
        redirectUris: body.redirect_uris, postLogoutRedirectUris: body.post_logout_redirect_uris, backchannelLogoutUri: body.backchannel_logout_uri,
        allowGroups: body.allow_groups, allowRoles: body.allow_roles, listed: body.listed,
      }, api(req, res));
      res.json(toPublicClient(changed));
    },
  }),
  route({
    ...admin, method: 'post', path: '/api/admin/clients/:client_id/rotate-secret', summary: 'Regenerate the client secret, optionally keeping the old one valid for a grace period',
    description: 'The body may be empty. `grace_seconds` (0 to 2592000, default 0) keeps the replaced secret working that long, so the client system can be reconfigured without an outage; with 0 the old secret fails at once. Only one previous secret is kept: a rotation with a grace while an earlier grace runs is refused with 409 `rotation_in_progress`; one without a grace ends it. Audited with the grace.',
    body: rotateSecretSchema,
    bodyOptional: true,
    example: { grace_seconds: 3600 },
    responses: {
      200: { description: 'The new secret, shown this once', schema: R.rotatedSecret, example: { client_id: 'shop', client_secret: 'pN4x0c2s9W1yQe6rT3uV8zA5bD7fG1hJ2kL4mN6oP8q', previous_secret_expires_at: '2026-01-31T13:00:00.000Z' } },
      400: invalid, 404: noClient, 409: err('A grace is still running (rotation_in_progress)', { error: 'rotation_in_progress', message: 'The previous secret is still valid; rotate without a grace to end it' }), ...guarded,
    },
    handle: ({ clients }) => async ({ req, res, body }) => {
      const { client: rotated, secret } = await clients.rotateSecret(clientIdParam(req), api(req, res), { graceSeconds: body.grace_seconds });
      res.json({ client_id: rotated.client_id, client_secret: secret, previous_secret_expires_at: isoOrNull(rotated.previous_secret_expires_at) });
    },
  }),
  route({
    ...admin, method: 'get', path: '/api/admin/users', summary: 'Search users by username, email or full name',
    query: searchUsersQuery,
    responses: { 200: { description: 'Matching users', schema: R.adminUser.array(), example: [adminUser] }, 400: invalid, ...guarded },
    handle: ({ userAdmin }) => async ({ res, query }) => {
      res.json(await userAdmin.search(query.q, query.limit));
    },
  }),
  route({
    ...admin, method: 'post', path: '/api/admin/users', summary: 'Create a user',
    body: createUserSchema,
    example: { username: 'bob', email: 'bob@example.com', password: 'a long enough passphrase', role: 'user', full_name: 'Bob Example' },
    responses: {
      201: { description: 'Created', schema: R.adminUser, example: { ...adminUser, id: 8, username: 'bob', email: 'bob@example.com', full_name: 'Bob Example' } },
      400: err('Invalid body, or a password the policy refuses (`invalid_password`)'), 409: err('Username or email taken'), ...guarded,
    },
    handle: ({ userAdmin }) => async ({ req, res, body }) => {
      res.status(201).json(await userAdmin.create(body, api(req, res)));
    },
  }),
  route({
    ...admin, method: 'get', path: '/api/admin/users/:id', params: userId, summary: 'One user, with the client systems linked on the dashboard',
    description: '`groups`: the user\'s groups; `usable_clients`: the active client systems whose access rule admits the user (docs/access.md).',
    responses: { 200: { description: 'The user', schema: R.adminUserDetail, example: { ...adminUser, linked_clients: [], groups: ['finance'], usable_clients: ['billing', 'shop'] } }, 400: badId, 404: noUser, ...guarded },
    handle: ({ userAdmin, access }) => async ({ res, params }) => {
      const user = await userAdmin.get(params.id);
      res.json({
        ...user, linked_clients: await userAdmin.links(params.id),
        groups: await access.groupsOf(params.id), usable_clients: (await access.clientsFor(params.id)).map((c) => c.client_id),
      });
    },
  }),
  route({
    ...admin, method: 'patch', path: '/api/admin/users/:id', params: userId, summary: 'Change a user (email, full name, role, active, password, must-change)',
    description: '`password` sets a new password (the password policy applies: `400 invalid_password` says what to fix); with `must_change_password: true` the next sign-in must choose another one (API logins answer `403 password_change_required`). A new password or `must_change_password: true` signs the user out everywhere (sessions, access tokens, unused SSO tokens; user.logout) and is audited as user.password_set; the password is never logged. The change is all or nothing: a refused password leaves the profile fields of the same request unchanged. A field sent with its current value is no change: the profile\'s audit entry (user.update, or user.activate / user.deactivate when only `active` changed) names only the fields that changed in `changed`, with `previous_role` when the role did, and a request that changes nothing writes none.',
    body: updateUserSchema,
    example: { password: 'temporary but long 2931', must_change_password: true },
    responses: {
      200: { description: 'The changed user', schema: R.adminUser, example: { ...adminUser, must_change_password: true } },
      400: err('Invalid body (`validation_error`), a password the policy refuses (`invalid_password`), or a malformed id (`invalid_id`)'),
      404: noUser,
      409: err('An administrator cannot take their own admin role or deactivate themselves (`cannot_demote_self`) or require their own password to be changed (`cannot_require_own_change`, as in the panel), the change would leave no active administrator (`last_admin`: two demoting each other at once), or the email is taken', { error: 'cannot_demote_self', message: 'You cannot remove your own administrator role or deactivate yourself' }),
      ...guarded,
    },
    handle: ({ userAdmin }) => async ({ req, res, params, body }) => {
      res.json(await userAdmin.update(params.id, body, api(req, res)));
    },
  }),
  route({
    ...admin, method: 'post', path: '/api/admin/users/:id/unlock', params: userId, summary: 'End a lockout now',
    responses: { 200: { description: 'The user', schema: R.adminUser, example: adminUser }, 400: badId, 404: noUser, ...guarded },
    handle: ({ userAdmin }) => async ({ req, res, params }) => {
      res.json(await userAdmin.unlock(params.id, api(req, res)));
    },
  }),
  route({
    ...admin, method: 'post', path: '/api/admin/users/:id/reset-2fa', params: userId, summary: 'Turn a user\'s two-factor authentication off',
    responses: { 200: { description: 'The user', schema: R.adminUser, example: adminUser }, 400: badId, 404: noUser, ...guarded },
    handle: ({ userAdmin }) => async ({ req, res, params }) => {
      res.json(await userAdmin.resetTwoFactor(params.id, api(req, res)));
    },
  }),
  route({
    ...admin, method: 'get', path: '/api/admin/audit', summary: 'The audit log: a page of JSON, or the filtered log streamed as CSV or NDJSON',
    description: 'Filters: `user` (a username; digits match that username or the user with that id), `client_id`, `action`, `outcome`, `ip` (one address, not a range), `from`/`to` (an ISO 8601 date or date-time of a real calendar day, no zone meaning UTC; `to` exclusive, a bare date as `to` includes that day; `11/26/2026` or `2020-02-30` is 400). `format=json` pages with `limit` and `cursor` (the previous `next_cursor`); `csv` and `ndjson` stream everything that matches as a download. Any other query key is 400 `validation_error`.',
    query: auditQuery,
    responses: {
      200: {
        description: 'By default one page of JSON, newest first; with `format=csv` or `format=ndjson` every matching entry, oldest first, as a download (`Content-Disposition: attachment`)',
        schema: R.auditPage,
        example: { entries: [{ id: 42, at: '2026-01-31T12:00:00.000Z', action: 'token.issue', outcome: 'success', user_id: 7, username: 'alice', client_id: 'shop', ip_address: '203.0.113.9', user_agent: 'curl/8', details: { jti: '9b1f…' } }], next_cursor: null },
        alternatives: [{ mediaType: 'text/csv' }, { mediaType: 'application/x-ndjson' }],
      },
      400: invalid, ...guarded,
    },
    /** A page of JSON (newest first, `next_cursor` for the next), or the whole filtered log streamed as CSV or NDJSON. */
    handle: ({ audit }) => async ({ req, res, query: q }) => {
      const filter = auditFilterOf(q);
      if (q.format === 'json') {
        const page = await audit.page(filter, q.limit, q.cursor);
        res.json({ entries: page.entries, next_cursor: page.nextCursor });
        return;
      }
      const stamp = new Date().toISOString().slice(0, 19).replace(/[-:]/g, '').replace('T', '-');
      const actor = api(req, res);
      const headers = () => {
        res.status(200);
        res.setHeader('Content-Type', q.format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8');
        res.setHeader('Content-Disposition', `attachment; filename="audit-${stamp}.${q.format}"`);
      };
      // a HEAD asks for the headers only (Express answers it with this GET handler): no export, nothing audited
      if (req.method === 'HEAD') headers();
      else await audit.export(filter, q.format, res, actor, headers);
      res.end();
    },
  }),
];
