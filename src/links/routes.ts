import type { Request } from 'express';
import { z } from 'zod';
import { actorOf } from '../auth/actor.ts';
import { clientIdParam, idParam } from '../http/params.ts';
import { clientIp } from '../http/client-ip.ts';
import { badClient, err, forbidden, invalid, limited, unauthenticated } from '../openapi/operation.ts';
import { route } from '../routes/declare.ts';
import { adminLinksQuery, approveLinkSchema, confirmLinkSchema, pendingLinksSchema } from './schemas.ts';
import { NAME_TAKEN, toPublicLink } from './service.ts';

function context(req: Request) {
  return { ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null };
}

const creds = { client_id: 'shop', client_secret: 'kq3vZl0b5H3o0f7J9yVwz2mQn8xR1tUe4sAa6dCc' };
const guarded = { 401: unauthenticated, 403: forbidden, 429: limited };
const badId = err('Malformed user id', { error: 'invalid_id', message: 'The id must be a positive integer' });
const noLink = err('No such link', { error: 'link_not_found', message: 'alice has no link at shop' });
const notAllowed = err('Caller IP not on the allow list', { error: 'ip_not_allowed', message: 'This address may not call this endpoint' });

/** A dashboard link (docs/dashboard-links.md). */
export const linkSchema = z.object({
  user_id: z.number().int(),
  client_id: z.string(),
  external_username: z.string().describe('The username at the client system'),
  status: z.enum(['pending', 'active']).describe('Only an active link\'s name goes into tokens'),
  requested_at: z.string(),
  confirmed_at: z.string().nullable(),
  confirmed_by: z.enum(['client', 'admin']).nullable(),
}).meta({ id: 'Link' });
const listedLink = linkSchema.extend({ username: z.string().describe('The account at this service'), client_name: z.string() });
const pendingLinks = z.object({
  links: z.array(z.object({ user_id: z.number().int(), account_username: z.string(), external_username: z.string(), requested_at: z.string() })),
});
const activeExample = {
  user_id: 7, client_id: 'shop', external_username: 'alice.shop', status: 'active',
  requested_at: '2026-01-31T12:00:00.000Z', confirmed_at: '2026-01-31T12:05:00.000Z', confirmed_by: 'client',
};
const pendingExample = { ...activeExample, status: 'pending', confirmed_at: null, confirmed_by: null };

/**
 * Proving dashboard links. For client systems (credentials in the body and a caller on the
 * client's allow list, like POST /api/sso/token): a client only ever sees and confirms links at
 * itself, the client is the authenticated caller, never a field. For administrators: list,
 * approve, revoke, under the per-user limit.
 */
/** A claimed name that is another user's own username (their tokens carry it without a link) or another user's proven link here. */
const nameIsAccount = err('The claimed name is another user\'s username or proven link at this client', {
  error: 'link_name_taken', message: NAME_TAKEN,
});

export const LINK_ROUTES = [
  route({
    method: 'post', path: '/api/sso/links/confirm', tag: 'SSO', access: 'client+ip', limit: 'none',
    summary: 'Confirm a dashboard link: user `user_id` is `username` at the calling client system',
    description: 'A user\'s dashboard link stays pending (tokens carry their own username) until the client system it names confirms it here, or an administrator approves it. '
      + 'The client is the one whose credentials these are: it can only confirm names at itself. `user_id` is the `user.id` of a validated token (or its `user_id` claim). '
      + 'The user must have claimed exactly `username` (compared normalized: NFKC, trimmed, case-insensitive); the confirmed spelling is kept. Confirming an active link again changes nothing.',
    body: confirmLinkSchema,
    example: { ...creds, user_id: 7, username: 'alice.shop' },
    responses: {
      200: { description: 'The link is active', schema: linkSchema, example: activeExample },
      400: invalid, 401: badClient, 403: notAllowed,
      404: err('No link of that user with that name at this client (the same answer for an unknown user)', { error: 'link_not_found', message: 'No link of that user with that username at this client system' }),
      409: nameIsAccount,
    },
    handle: ({ links }) => async ({ req, res, body, client }) => {
      res.json(toPublicLink(await links.confirmByClient(client.client_id, body.user_id, body.username, context(req))));
    },
  }),
  route({
    method: 'post', path: '/api/sso/links/pending', tag: 'SSO', access: 'client+ip', limit: 'none',
    summary: 'The dashboard links awaiting the calling client system\'s confirmation',
    body: pendingLinksSchema,
    example: creds,
    responses: {
      200: { description: 'Oldest first', schema: pendingLinks, example: { links: [{ user_id: 7, account_username: 'alice', external_username: 'alice.shop', requested_at: '2026-01-31T12:00:00.000Z' }] } },
      400: invalid, 401: badClient, 403: notAllowed,
    },
    handle: ({ links }) => async ({ res, client }) => {
      const listed = await links.list({ clientId: client.client_id, status: 'pending' }, 500);
      res.json({
        links: listed.map((l) => ({ user_id: l.user_id, account_username: l.username, external_username: l.external_username, requested_at: l.requested_at })),
      });
    },
  }),
  route({
    method: 'get', path: '/api/admin/links', tag: 'Administration', access: 'admin', limit: 'user',
    summary: 'Dashboard links, filtered by status, client and user',
    query: adminLinksQuery,
    responses: { 200: { description: 'Oldest request first', schema: listedLink.array(), example: [{ ...pendingExample, username: 'alice', client_name: 'Shop' }] }, 400: invalid, ...guarded },
    handle: ({ links }) => async ({ res, query }) => {
      res.json(await links.list({ status: query.status, clientId: query.client_id, userId: query.user_id }, query.limit));
    },
  }),
  route({
    method: 'post', path: '/api/admin/users/:id/links/:client_id/approve', tag: 'Administration', access: 'admin', limit: 'user',
    summary: 'Approve a pending dashboard link: its name goes into the user\'s tokens',
    description: 'Send the name you reviewed as `external_username`: a link whose user has put another name in its place since is not approved (409 link_changed).',
    body: approveLinkSchema, bodyOptional: true, example: { external_username: 'alice.shop' },
    responses: {
      200: { description: 'The active link', schema: linkSchema, example: { ...activeExample, confirmed_by: 'admin' } }, 400: badId, 404: noLink,
      409: err('The link now names another name than `external_username` (link_changed), or its name is another user\'s username or proven link there (link_name_taken)', {
        error: 'link_changed', message: 'The link\'s name is now shop-admin, not alice.shop: review it again',
      }),
      ...guarded,
    },
    handle: ({ links }) => async ({ req, res, body }) => {
      res.json(toPublicLink(await links.approve(idParam(req), clientIdParam(req), actorOf(req, res, 'admin_api'), body.external_username)));
    },
  }),
  route({
    method: 'delete', path: '/api/admin/users/:id/links/:client_id', tag: 'Administration', access: 'admin', limit: 'user',
    summary: 'Revoke a dashboard link (pending or active); its name stops at once',
    description: 'The user\'s unused tokens for that client are invalidated in the same transaction.',
    responses: { 200: { description: 'The removed link', schema: z.object({ revoked: linkSchema, invalidated_tokens: z.number().int() }), example: { revoked: activeExample, invalidated_tokens: 0 } }, 400: badId, 404: noLink, ...guarded },
    handle: ({ links }) => async ({ req, res }) => {
      const { link, invalidatedTokens } = await links.revoke(idParam(req), clientIdParam(req), actorOf(req, res, 'admin_api'));
      res.json({ revoked: toPublicLink(link), invalidated_tokens: invalidatedTokens });
    },
  }),
];
