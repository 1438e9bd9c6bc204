import { clientIp, normalizeIp } from '../http/client-ip.ts';
import { badClient, err, invalid, limited } from '../openapi/operation.ts';
import * as R from '../openapi/responses.ts';
import { type DocResponse, route } from '../routes/declare.ts';
import { issueTokenSchema, logoutTokenSchema, validateTokenSchema } from './schemas.ts';

/** Marks every answer of the legacy route as superseded by /api/sso/validate. */
const LEGACY_HEADERS = { Deprecation: 'true', Link: '</api/sso/validate>; rel="successor-version"' };

const jwt = 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ1c2VyX2lkIjoiNyJ9.c2lnbmF0dXJl';
const creds = { client_id: 'shop', client_secret: 'kq3vZl0b5H3o0f7J9yVwz2mQn8xR1tUe4sAa6dCc' };
const ipNotAllowed = err('Caller IP not on the allow list', { error: 'ip_not_allowed', message: 'This address may not call this endpoint' });

const validateResponses = (legacy: boolean): Record<number, DocResponse> => {
  const responses: Record<number, DocResponse> = {
  200: { description: 'The token is valid (and now used)', schema: R.validatedToken, example: { valid: true, user: { id: 7, username: 'alice', email: 'alice@example.com', roles: ['user'], full_name: 'Alice Example' }, expires_at: '2026-01-31 12:01:00' } },
  400: invalid,
  401: {
    description: 'A refused token (`valid: false` with the reason; `access_denied` when the client\'s access rule no longer admits the user, docs/access.md), or invalid client credentials (`invalid_client`, an error body without `valid`)',
    schema: R.validationRefusal,
    example: { valid: false, error: 'token_already_used', message: 'The token has already been used' },
  },
  429: limited,
  };
  if (legacy) responses[403] = ipNotAllowed;
  return responses;
};

/**
 * A client system validates (and so uses up) a token. The legacy route also checks the
 * caller's allow list and says it is superseded.
 */
const validateRoute = (legacy: boolean) => route({
  method: 'post', path: legacy ? '/api/validate-token' : '/api/sso/validate', tag: 'SSO',
  access: legacy ? 'client+ip' : 'client', limit: 'validation', hot: true,
  headers: legacy ? LEGACY_HEADERS : undefined,
  summary: legacy ? 'Validate a token (legacy; IP allow list)' : 'Validate and consume an SSO token',
  description: legacy
    ? 'Same body and answers as POST /api/sso/validate; answers carry `Deprecation: true` and `Link: </api/sso/validate>; rel="successor-version"`.'
    : 'A token is valid once, for the client it was issued to. With `ip_address`, it must equal the address the token is bound to.',
  body: validateTokenSchema,
  example: { ...creds, token: jwt, ip_address: '203.0.113.9' },
  responses: validateResponses(legacy),
  handle: ({ sso }) => async ({ req, res, body, client }) => {
    res.json(await sso.validate(client, body.token, {
      ipAddress: clientIp(req),
      userAgent: req.get('user-agent') ?? null,
      expectedIp: body.ip_address && normalizeIp(body.ip_address),
      clientVersion: client.version, // consumed only while the client is as authenticated (src/clients/guards.ts)
    }));
  },
});

/** Server-to-server SSO endpoints: issue, validate (and its legacy route), client sign-out. */
export const SSO_ROUTES = [
  route({
    method: 'post', path: '/api/sso/token', tag: 'SSO', access: 'client+ip', limit: 'tokenIssue', hot: true,
    summary: 'Issue an SSO token for a user (server to server)',
    description: '`ip_address` is the end user\'s address as the client saw it; the token is bound to it (default: the caller\'s address). Emits user.login. '
      + 'A client restricted to groups or roles (docs/access.md) answers 403 `access_denied` for any other user, audited, with no user.login. The token\'s `roles` are the user\'s role, then `group:NAME` for each of their groups, sorted.',
    body: issueTokenSchema,
    example: { ...creds, username: 'alice', ip_address: '203.0.113.9' },
    responses: {
      200: { description: 'Token issued', schema: R.issuedToken, example: { token: jwt, redirect_url: `https://shop.example/sso/callback?token=${jwt}` } },
      400: invalid,
      401: badClient,
      403: err('Caller IP not on the allow list (`ip_not_allowed`), or the client\'s access rule does not admit the user (`access_denied`: not in a group or role it names, docs/access.md)',
        { error: 'access_denied', message: 'You do not have access to Shop' }),
      404: err('User not found or inactive', { error: 'user_not_found', message: 'User not found or inactive' }),
      409: err('The client system\'s registered callback URL is not usable', { error: 'client_misconfigured', message: 'The callback URL registered for this client system is not usable; an administrator must correct it' }),
      429: limited,
    },
    handle: ({ sso }) => async ({ req, res, body, client }) => {
      const result = await sso.issueByUsername(client, body.username, {
        ipAddress: clientIp(req),
        userAgent: req.get('user-agent') ?? null,
        tokenIp: body.ip_address && normalizeIp(body.ip_address),
        clientVersion: client.version, // issued only while the client is as authenticated (src/clients/guards.ts)
      });
      res.json({ token: result.token, redirect_url: result.redirect_url });
    },
  }),
  validateRoute(false),
  validateRoute(true),
  route({
    method: 'post', path: '/api/sso/logout', tag: 'SSO', access: 'client', limit: 'none',
    summary: 'Sign a user out from a client system',
    description: 'Give any token this client received for the user (used or expired is fine). Ends the user\'s session at this service in the browser '
      + 'that signed in for that token (a token issued by `POST /api/sso/token` has none), so that browser\'s next visit to /sso/login asks for the password again; '
      + 'invalidates the user\'s unused SSO tokens (`invalidated_tokens` counts them), audits and emits user.logout. The user\'s sessions in other browsers are left as they are.',
    body: logoutTokenSchema,
    example: { ...creds, token: jwt },
    responses: {
      200: { description: 'Signed out', schema: R.clientLogout, example: { success: true, invalidated_tokens: 1 } },
      400: invalid,
      401: err('Invalid client credentials (`invalid_client`), or a token that was not issued to this client (`invalid_token`)', { error: 'invalid_token', message: 'The token is invalid' }),
    },
    /** A client system ends a user's sign-in: the browser session behind its token ends, the user's unused tokens die. */
    handle: ({ auth }) => async ({ req, res, body, client }) => {
      const { invalidatedTokens } = await auth.logoutByClientToken(client, body.token, {
        ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null,
      });
      res.json({ success: true, invalidated_tokens: invalidatedTokens });
    },
  }),
];
