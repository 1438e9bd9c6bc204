import { sessionLoginSchema, tokenLoginSchema } from '../auth/schemas.ts';
import { clientFormSchema, clientLoginQuerySchema, linkFormSchema, loginFormSchema, securityCodeSchema } from '../pages/schemas.ts';
import { issueTokenSchema, logoutTokenSchema, validateTokenSchema } from '../sso/schemas.ts';
import { twoFactorCodeSchema } from '../users/schemas.ts';
import { listDeliveriesQuery, registerWebhookSchema, updateWebhookSchema } from '../webhooks/schemas.ts';
import { ADMIN_OPERATIONS } from './operations-admin.ts';
import { LINK_OPERATIONS } from './operations-links.ts';
import { PASSWORD_OPERATIONS } from './operations-passwords.ts';
import { badClient, type DocResponse, err, forbidden, html, invalid, limited, type Operation, redirect, unauthenticated } from './operation.ts';
import * as R from './responses.ts';

export type { Access, DocResponse, Operation } from './operation.ts';

const user = { id: 7, username: 'alice', email: 'alice@example.com', role: 'user', full_name: 'Alice Example' };
const jwt = 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ1c2VyX2lkIjoiNyJ9.c2lnbmF0dXJl';
const creds = { client_id: 'shop', client_secret: 'kq3vZl0b5H3o0f7J9yVwz2mQn8xR1tUe4sAa6dCc' };

const validateOperation = (path: string, legacy: boolean): Operation => {
  const responses: Record<number, DocResponse> = {
    200: { description: 'The token is valid (and now used)', schema: R.validatedToken, example: { valid: true, user: { id: 7, username: 'alice', email: 'alice@example.com' }, expires_at: '2026-01-31 12:01:00' } },
    400: invalid,
    401: { description: 'Refused token (`valid: false`) or invalid client credentials', schema: R.tokenRefusal, example: { valid: false, error: 'token_already_used', message: 'The token has already been used' } },
    429: limited,
  };
  if (legacy) responses[403] = err('Caller IP not on the allow list', { error: 'ip_not_allowed', message: 'This address may not call this endpoint' });
  return {
  method: 'post', path, tag: 'SSO', access: legacy ? 'client+ip' : 'client', limit: 'validation',
  summary: legacy ? 'Validate a token (legacy; IP allow list)' : 'Validate and consume an SSO token',
  description: legacy
    ? 'Same body and answers as POST /api/sso/validate; answers carry `Deprecation: true` and `Link: </api/sso/validate>; rel="successor-version"`.'
    : 'A token is valid once, for the client it was issued to. With `ip_address`, it must equal the address the token is bound to.',
  body: validateTokenSchema,
  example: { ...creds, token: jwt, ip_address: '203.0.113.9' },
  responses,
  };
};

/** What both sign-in forms answer besides their success redirect. */
const loginFormAnswers = {
  200: html('Two-factor step'), 401: html('Invalid credentials'), 403: html('Missing or wrong CSRF token'),
  423: html('Account locked'), 429: html('Rate limited'),
};

/**
 * Every route the app mounts. Add a row when you add a route: the reference test fails for
 * a mounted route missing here (and for a row whose example does not validate).
 */
/** A malformed `:id` (not a positive integer) on a webhook route. */
const badId = err('Malformed id', { error: 'invalid_id', message: 'The id must be a positive integer' });

export const OPERATIONS: Operation[] = [
  // SSO for client systems
  {
    method: 'post', path: '/api/sso/token', tag: 'SSO', access: 'client+ip',
    summary: 'Issue an SSO token for a user (server to server)',
    description: '`ip_address` is the end user\'s address as the client saw it; the token is bound to it (default: the caller\'s address). Emits user.login.',
    body: issueTokenSchema,
    example: { ...creds, username: 'alice', ip_address: '203.0.113.9' },
    responses: {
      200: { description: 'Token issued', schema: R.issuedToken, example: { token: jwt, redirect_url: `https://shop.example/sso/callback?token=${jwt}` } },
      400: invalid,
      401: badClient,
      403: err('Caller IP not on the allow list', { error: 'ip_not_allowed', message: 'This address may not call this endpoint' }),
      404: err('User not found or inactive', { error: 'user_not_found', message: 'User not found or inactive' }),
      409: err('The client system\'s registered callback URL is not usable', { error: 'client_misconfigured', message: 'The callback URL registered for this client system is not usable; an administrator must correct it' }),
    },
  },
  validateOperation('/api/sso/validate', false),
  validateOperation('/api/validate-token', true),
  {
    method: 'post', path: '/api/sso/logout', tag: 'SSO', access: 'client',
    summary: 'Sign a user out from a client system',
    description: 'Give any token this client received for the user (used or expired is fine). Ends the user\'s sessions, invalidates their unused tokens for this client, emits user.logout.',
    body: logoutTokenSchema,
    example: { ...creds, token: jwt },
    responses: { 200: { description: 'Signed out', schema: R.clientLogout, example: { success: true, invalidated_tokens: 1 } }, 400: invalid, 401: badClient },
  },

  // User sign-in over the API
  {
    method: 'post', path: '/api/auth/login', tag: 'Sign-in', access: 'public', limit: 'login',
    summary: 'Sign in and start a session',
    description: '`totp` is required for users with two-factor authentication (a TOTP or a recovery code). Sets the session cookie.',
    body: sessionLoginSchema,
    example: { login: 'alice', password: 'correct horse battery', totp: '123456' },
    responses: {
      200: { description: 'Signed in', schema: R.sessionLogin, example: { success: true, user } },
      400: invalid,
      401: err('Invalid credentials (`invalid_credentials`), wrong two-factor code (`invalid_totp`), a code already used (`totp_reused`: wait for the next one), or a missing code (`totp_required`, not counted). Counted failures carry `attempts_remaining`; at 1 the message warns that the next failure locks.',
        { error: 'invalid_credentials', message: 'Invalid login or password. One more failed attempt locks the account for 30 minutes.', attempts_remaining: 1 }),
      423: err('Account locked: on the failed attempt that sets the lock ("now locked") and on every attempt while it lasts', { error: 'account_locked', message: 'Too many failed sign-in attempts: this account is now locked for 30 minutes.', remaining_minutes: 30 }),
      429: limited,
    },
  },
  {
    method: 'post', path: '/api/login', tag: 'Sign-in', access: 'public', limit: 'login',
    summary: 'Sign in and get an access token for this service\'s API',
    body: tokenLoginSchema,
    example: { username: 'alice', password: 'correct horse battery' },
    responses: {
      200: { description: 'Signed in', schema: R.accessToken, example: { token: jwt, token_type: 'Bearer', expires_in: 900, user } },
      400: invalid,
      401: err('Invalid credentials or two-factor code, as for /api/auth/login (with `attempts_remaining`)', { error: 'invalid_credentials', message: 'Invalid login or password.', attempts_remaining: 4 }),
      423: err('Account locked, as for /api/auth/login', { error: 'account_locked', message: 'Too many failed sign-in attempts. This account is locked; try again in 30 minutes.', remaining_minutes: 30 }),
      429: limited,
    },
  },
  {
    method: 'post', path: '/api/auth/logout', tag: 'Sign-in', access: 'public',
    summary: 'Sign out: end the session, invalidate unused SSO tokens',
    responses: { 200: { description: 'Signed out (also when nobody was signed in)', schema: R.success, example: { success: true } } },
  },

  // The signed-in user
  {
    method: 'get', path: '/api/user', tag: 'User', access: 'user', limit: 'user',
    summary: 'The signed-in user\'s profile',
    responses: { 200: { description: 'Profile', schema: R.publicUser, example: user }, 401: unauthenticated, 429: limited },
  },
  {
    method: 'post', path: '/api/user/2fa/setup', tag: 'User', access: 'user', limit: 'user',
    summary: 'Start two-factor enrollment: a new TOTP secret',
    responses: { 200: { description: 'Secret, otpauth URI and QR code', schema: R.totpSetup }, 401: unauthenticated, 409: err('Already enabled'), 429: limited },
  },
  {
    method: 'post', path: '/api/user/2fa/enable', tag: 'User', access: 'user', limit: 'user',
    summary: 'Turn two-factor on with one valid code; returns recovery codes once',
    body: twoFactorCodeSchema,
    example: { code: '123456' },
    responses: {
      200: { description: 'Enabled; emits user.2fa_enabled', schema: R.totpEnabled },
      400: err('Invalid code (`invalid_totp`), a code already used (`totp_reused`), or body', { error: 'invalid_totp', message: 'The two-factor code is invalid' }),
      401: unauthenticated, 409: err('Already enabled, or no setup started'), 429: limited,
    },
  },
  {
    method: 'post', path: '/api/user/2fa/disable', tag: 'User', access: 'user', limit: 'user',
    summary: 'Turn two-factor off with a TOTP or recovery code',
    body: twoFactorCodeSchema,
    example: { code: 'ABCD-EFGH-JKLM' },
    responses: { 200: { description: 'Disabled', schema: R.totpDisabled, example: { totp_enabled: false } }, 400: invalid, 401: unauthenticated, 429: limited },
  },

  // Webhooks (administrators)
  {
    method: 'post', path: '/api/webhooks', tag: 'Webhooks', access: 'admin', limit: 'user',
    summary: 'Register a webhook',
    description: 'Deliveries are POSTs of `{event, timestamp, data}` signed with `X-AUTH-Signature` (hex HMAC-SHA256 of the raw body, keyed with `secret`). The secret is never returned.',
    body: registerWebhookSchema,
    example: { url: 'https://shop.example/hooks/auth', events: ['user.login', 'user.locked'], secret: 'a-signing-secret-of-16+-chars' },
    responses: {
      201: { description: 'Registered', schema: R.webhook, example: { id: 3, url: 'https://shop.example/hooks/auth', events: ['user.login', 'user.locked'], active: true, created_at: '2026-01-31T12:00:00.000Z' } },
      400: invalid, 401: unauthenticated, 403: forbidden, 429: limited,
    },
  },
  {
    method: 'get', path: '/api/webhooks', tag: 'Webhooks', access: 'admin', limit: 'user',
    summary: 'List webhooks',
    responses: { 200: { description: 'All webhooks, without secrets', schema: R.webhook.array() }, 401: unauthenticated, 403: forbidden, 429: limited },
  },
  {
    method: 'patch', path: '/api/webhooks/:id', tag: 'Webhooks', access: 'admin', limit: 'user',
    summary: 'Change a webhook: any of url, events, active, secret',
    description: 'Each field is validated as at registration (the same SSRF guard for `url`). The delivery history is kept. Every later attempt, retries of earlier events included, goes to the new URL signed with the new secret: to rotate a secret without losing events, let the receiver accept both secrets first. `active: false` closes pending deliveries as failed (they can be redelivered later); `active: true` turns a webhook disabled by a 410 back on. Audited, without the secret.',
    body: updateWebhookSchema,
    example: { secret: 'the-new-signing-secret-of-16+-chars' },
    responses: {
      200: { description: 'The changed webhook (never the secret)', schema: R.webhook, example: { id: 3, url: 'https://shop.example/hooks/auth', events: ['user.login', 'user.locked'], active: true, created_at: '2026-01-31T12:00:00.000Z', disabled_reason: null } },
      400: err('Invalid body, URL not allowed, or a malformed id', { error: 'invalid_id', message: 'The id must be a positive integer' }),
      401: unauthenticated, 403: forbidden, 404: err('No such webhook'), 429: limited,
    },
  },
  {
    method: 'delete', path: '/api/webhooks/:id', tag: 'Webhooks', access: 'admin', limit: 'user',
    summary: 'Delete a webhook',
    responses: { 204: { description: 'Deleted' }, 400: badId, 401: unauthenticated, 403: forbidden, 404: err('No such webhook'), 429: limited },
  },
  {
    method: 'get', path: '/api/webhooks/:id/deliveries', tag: 'Webhooks', access: 'admin', limit: 'user',
    summary: 'A webhook\'s recent deliveries with their attempts',
    query: listDeliveriesQuery,
    responses: { 200: { description: 'Newest first', schema: R.webhookDelivery.array() }, 400: err('Invalid query or a malformed id'), 401: unauthenticated, 403: forbidden, 404: err('No such webhook'), 429: limited },
  },
  {
    method: 'post', path: '/api/webhooks/:id/deliveries/:delivery/redeliver', tag: 'Webhooks', access: 'admin', limit: 'user',
    summary: 'Send a finished delivery again (same delivery id)',
    responses: { 202: { description: 'Queued', schema: R.redelivery }, 400: badId, 401: unauthenticated, 403: forbidden, 404: err('No such webhook or delivery'), 409: err('Still pending'), 429: limited },
  },

  // Browser pages
  {
    method: 'get', path: '/sso/login', tag: 'Pages', access: 'public',
    summary: 'SSO login page for a client system',
    description: 'Signed-in users go straight back to the client; otherwise the sign-in form. After sign-in the browser is redirected to the client\'s callback URL with `token` (and `state`).',
    query: clientLoginQuerySchema,
    responses: { 200: html('The sign-in page'), 303: redirect('Already signed in: to the callback with ?token='), 400: html('Unknown client or bad parameters') },
  },
  {
    method: 'post', path: '/sso/login', tag: 'Pages', access: 'page', limit: 'login', bodyType: 'form',
    summary: 'Submit the SSO sign-in form (password step, then two-factor step)',
    body: loginFormSchema,
    example: { step: 'password', login: 'alice', password: 'correct horse battery' },
    responses: { 303: redirect('Signed in: to the client\'s callback with ?token='), ...loginFormAnswers },
  },
  {
    method: 'get', path: '/login', tag: 'Pages', access: 'public',
    summary: 'Sign-in page of this service (dashboard)',
    responses: { 200: html('The sign-in page'), 303: redirect('Already signed in') },
  },
  {
    method: 'post', path: '/login', tag: 'Pages', access: 'page', limit: 'login', bodyType: 'form',
    summary: 'Submit the dashboard sign-in form',
    body: loginFormSchema,
    example: { step: 'totp', code: '123456', pending_key: 'k1' },
    responses: { 303: redirect('Signed in: to the dashboard'), ...loginFormAnswers },
  },
  {
    method: 'get', path: '/sso/logout', tag: 'Pages', access: 'page',
    summary: 'Sign out in the browser',
    responses: { 200: html('Signed out') },
  },
  { method: 'get', path: '/', tag: 'Pages', access: 'public', summary: 'Redirects to the dashboard', responses: { 303: redirect('To /dashboard') } },
  {
    method: 'get', path: '/dashboard', tag: 'Pages', access: 'page',
    summary: 'The user dashboard: linked client systems, one-click sign-in',
    responses: { 200: html('Dashboard'), 303: redirect('Not signed in: to /login') },
  },
  {
    method: 'post', path: '/dashboard/link', tag: 'Pages', access: 'page', bodyType: 'form',
    summary: 'Claim the username used at a client system (pending until the system or an administrator confirms it)',
    description: 'Refused (back to the dashboard with the reason) when another account holds or has claimed that name at that system; the answer does not say which. Claiming another name replaces the link, pending again.',
    body: linkFormSchema, example: { client_id: 'shop', external_username: 'alice.shop' },
    responses: { 303: redirect('Back to the dashboard'), 400: html('Invalid form'), 403: html('Missing or wrong CSRF token') },
  },
  {
    method: 'post', path: '/dashboard/unlink', tag: 'Pages', access: 'page', bodyType: 'form',
    summary: 'Withdraw the link to a client system (pending or active); its name stops at once',
    body: clientFormSchema, example: { client_id: 'shop' },
    responses: { 303: redirect('Back to the dashboard'), 400: html('Invalid form'), 403: html('Missing or wrong CSRF token') },
  },
  {
    method: 'post', path: '/dashboard/sign-in', tag: 'Pages', access: 'page', bodyType: 'form',
    summary: 'One-click sign-in to a linked client system',
    description: 'The token\'s `username` claim is the linked name only when the link is active; for a pending link it is the user\'s own username.',
    body: clientFormSchema, example: { client_id: 'shop' },
    responses: { 303: redirect('To the client\'s callback with ?token='), 400: html('Invalid form or not linked'), 403: html('Missing or wrong CSRF token') },
  },
  {
    method: 'get', path: '/account/security', tag: 'Pages', access: 'page',
    summary: 'Account security: two-step verification on and off, recovery codes (shown once), links to password and sessions',
    responses: { 200: html('Account security'), 303: redirect('Not signed in: to /login') },
  },
  {
    method: 'post', path: '/account/security/totp/setup', tag: 'Pages', access: 'page', limit: 'user', bodyType: 'form',
    summary: 'Start two-step verification: a new key, shown as QR code and text (as POST /api/user/2fa/setup)',
    responses: { 303: redirect('To /account/security#setup'), 403: html('Missing or wrong CSRF token') },
  },
  {
    method: 'post', path: '/account/security/totp/enable', tag: 'Pages', access: 'page', limit: 'user', bodyType: 'form',
    summary: 'Turn two-step verification on with a code of the new key; the recovery codes are shown once on the page that follows',
    body: securityCodeSchema, example: { code: '123456' },
    responses: { 303: redirect('To /account/security#recovery-codes'), 400: html('The page again, the code field marked'), 403: html('Missing or wrong CSRF token') },
  },
  {
    method: 'post', path: '/account/security/recovery-codes', tag: 'Pages', access: 'page', limit: 'user', bodyType: 'form',
    summary: 'Replace the recovery codes (confirmed with a TOTP or recovery code); the new ones are shown once',
    body: securityCodeSchema, example: { code: '123456' },
    responses: { 303: redirect('To /account/security#recovery-codes'), 400: html('The page again, the code field marked'), 403: html('Missing or wrong CSRF token') },
  },
  {
    method: 'post', path: '/account/security/totp/disable', tag: 'Pages', access: 'page', limit: 'user', bodyType: 'form',
    summary: 'Turn two-step verification off with a TOTP or recovery code (as POST /api/user/2fa/disable)',
    body: securityCodeSchema, example: { code: 'k7m2p-x9qre-4hvtd-wn3ca' },
    responses: { 303: redirect('To /account/security'), 400: html('The page again, the code field marked'), 403: html('Missing or wrong CSRF token') },
  },
  {
    method: 'get', path: '/demo/callback', tag: 'Pages', access: 'public',
    summary: 'Demo client callback (development only: not mounted in production)',
    responses: { 200: html('Shows the validation result of ?token=') },
  },

  // Operations
  { method: 'get', path: '/healthz', tag: 'Operations', access: 'public', summary: 'Liveness: the process answers', responses: { 200: { description: 'Alive', schema: R.health, example: { status: 'ok' } } } },
  {
    method: 'get', path: '/readyz', tag: 'Operations', access: 'public', summary: 'Readiness: the database answers and can serve the service',
    responses: {
      200: { description: 'Ready', schema: R.ready, example: { status: 'ready', database: 'postgres' } },
      503: err('The database does not answer, or lacks a table, a column or a right the service needs (the message names it)', { error: 'not_ready', message: 'The database cannot be used: missing tables: sso_tokens' }),
    },
  },
  { method: 'get', path: '/metrics', tag: 'Operations', access: 'public', summary: 'Prometheus metrics (keep off the public network)', responses: { 200: { description: 'Prometheus text format', mediaType: 'text/plain' } } },
  { method: 'get', path: '/api/openapi.json', tag: 'Operations', access: 'public', summary: 'This API reference as OpenAPI 3.1', responses: { 200: { description: 'The document' } } },
  { method: 'get', path: '/docs', tag: 'Operations', access: 'public', summary: 'This API reference, readable', responses: { 200: html('The reference page') } },

  ...ADMIN_OPERATIONS,
  ...LINK_OPERATIONS,
  ...PASSWORD_OPERATIONS,
];
