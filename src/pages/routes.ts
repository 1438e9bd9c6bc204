import { html, pageError, redirect } from '../openapi/operation.ts';
import { handlersFrom, route } from '../routes/declare.ts';
import { accountSecurityHandlers } from './account-security.ts';
import { dashboardHandlers } from './dashboard.ts';
import { demoCallback } from './demo.ts';
import { loginHandlers } from './login.ts';
import { clientTarget, serviceTarget } from './login-target.ts';
import { clientFormSchema, clientLoginQuerySchema, linkFormSchema, loginFormSchema, passkeyRemoveParams, securityCodeSchema, securityEnableSchema } from './schemas.ts';

const login = handlersFrom((s) => loginHandlers({ auth: s.auth, sso: s.sso, links: s.links, passkeys: s.passkeys }));
const dashboard = handlersFrom((s) => dashboardHandlers({ ...s, publicUrl: s.deps.config.PUBLIC_URL }));
const security = handlersFrom((s) => accountSecurityHandlers(s));
const demo = handlersFrom((s) => ({ callback: demoCallback({ dataDir: s.deps.config.DATA_DIR }) }));

/** What both sign-in forms answer besides their success redirect. */
const loginFormAnswers = {
  200: html('Two-factor step'), 401: html('Invalid credentials'), 403: pageError('Missing or wrong CSRF token'),
  423: html('Account locked'), 429: pageError('Rate limited'),
};
const formRefused = { 400: pageError('Invalid form: the page again with the problem'), 403: pageError('Missing or wrong CSRF token') };
const codeRefused = { 400: html('The page again, the code field marked'), 403: pageError('Missing or wrong CSRF token') };
/** A refused code counts toward the sign-in lock (src/auth/two-factor.ts). */
const codeLocked = { 423: html('Account locked (by refused codes or wrong passwords): the page again, saying for how long; no code is checked meanwhile') };

/**
 * The server-rendered pages: sign-in for client systems (/sso/login) and for this service
 * (/login), sign-out, the user dashboard, account security, and (outside production) the
 * demo client's callback page. Every answer is no-store; every state-changing form is
 * CSRF-checked; the sign-in forms share the per-IP limit of the API's login endpoints, and the
 * code checks of the security page the per-user limit.
 */
export const PAGE_ROUTES = [
  route({
    method: 'get', path: '/', tag: 'Pages', access: 'page', limit: 'none',
    summary: 'Redirects to the dashboard',
    responses: { 303: redirect('To /dashboard') },
    handle: () => ({ res }) => res.redirect(303, '/dashboard'),
  }),
  route({
    method: 'get', path: '/sso/login', tag: 'Pages', access: 'page', limit: 'userWhenSignedIn',
    summary: 'SSO login page for a client system',
    description: 'Signed-in users go straight back to the client; otherwise the sign-in form. After sign-in the browser is redirected to the client\'s callback URL with `token` (and `state`).',
    query: clientLoginQuerySchema, queryCheckedByHandler: true,
    // a signed-in browser gets a token at once: under the per-user limit, as the dashboard's
    // one-click sign-in (the same token); the form itself is shown to anyone without one
    before: (s) => [clientTarget(s.clients, 'query')],
    responses: {
      200: html('The sign-in page'), 303: redirect('Already signed in: to the callback with ?token='), 400: pageError('Unknown client (`unknown_client`) or bad parameters'),
      403: html('Signed in, but the client\'s access rule does not admit the user: "You do not have access to NAME" (docs/access.md), no token'),
    },
    handle: login.handle((h) => h.show),
  }),
  route({
    method: 'post', path: '/sso/login', tag: 'Pages', access: 'page', limit: 'login', bodyType: 'form',
    summary: 'Submit the SSO sign-in form (password step, then two-factor step)',
    body: loginFormSchema,
    example: { step: 'password', login: 'alice', password: 'correct horse battery' },
    before: (s) => [clientTarget(s.clients, 'body')],
    responses: {
      303: redirect('Signed in: to the client\'s callback with ?token='), 400: pageError('Unknown client (`unknown_client`) or an invalid form'), ...loginFormAnswers,
      403: pageError('Missing or wrong CSRF token, or the right credentials of a user the client\'s access rule does not admit: "You do not have access to NAME" (docs/access.md), no session, no token'),
    },
    handle: login.handle((h) => h.submit),
    onError: login.onError((h) => h.failed),
  }),
  route({
    method: 'get', path: '/login', tag: 'Pages', access: 'page', limit: 'none',
    summary: 'Sign-in page of this service (dashboard)',
    before: () => [serviceTarget],
    responses: { 200: html('The sign-in page'), 303: redirect('Already signed in') },
    handle: login.handle((h) => h.show),
  }),
  route({
    method: 'post', path: '/login', tag: 'Pages', access: 'page', limit: 'login', bodyType: 'form',
    summary: 'Submit the dashboard sign-in form',
    body: loginFormSchema,
    example: { step: 'totp', code: '123456', pending_key: 'k1' },
    before: () => [serviceTarget],
    responses: { 303: redirect('Signed in: to the dashboard'), 400: pageError('Invalid form'), ...loginFormAnswers },
    handle: login.handle((h) => h.submit),
    onError: login.onError((h) => h.failed),
  }),
  route({
    method: 'get', path: '/sso/logout', tag: 'Pages', access: 'page', limit: 'none',
    summary: 'Sign out in the browser',
    responses: { 200: html('Signed out') },
    handle: login.handle((h) => h.logout),
  }),
  route({
    method: 'get', path: '/dashboard', tag: 'Pages', access: 'page-user', limit: 'none',
    summary: 'The user dashboard: a launcher of the client systems the user may use, one-click sign-in',
    responses: { 200: html('Dashboard') },
    handle: dashboard.handle((h) => h.show),
  }),
  route({
    method: 'post', path: '/dashboard/link', tag: 'Pages', access: 'page-user', limit: 'user', bodyType: 'form',
    summary: 'Claim the username used at a client system (pending until the system or an administrator confirms it)',
    description: 'Refused (back to the dashboard with the reason) when another account holds or has claimed that name at that system; the answer does not say which. Claiming another name replaces the link, pending again.',
    body: linkFormSchema, example: { client_id: 'shop', external_username: 'alice.shop' },
    responses: { 303: redirect('Back to the dashboard'), ...formRefused },
    handle: dashboard.handle((h) => h.link),
    onError: dashboard.onError((h) => h.failed),
  }),
  route({
    method: 'post', path: '/dashboard/unlink', tag: 'Pages', access: 'page-user', limit: 'user', bodyType: 'form',
    summary: 'Withdraw the link to a client system (pending or active); its name stops at once',
    body: clientFormSchema, example: { client_id: 'shop' },
    responses: { 303: redirect('Back to the dashboard'), ...formRefused },
    handle: dashboard.handle((h) => h.unlink),
    onError: dashboard.onError((h) => h.failed),
  }),
  route({
    method: 'post', path: '/dashboard/sign-in', tag: 'Pages', access: 'page-user', limit: 'user', bodyType: 'form',
    summary: 'One-click sign-in to a client system the user may use (the launcher\'s "Open")',
    description: 'The token\'s `username` claim is the linked name only when the link is active; without one, or for a pending link, it is the user\'s own username. '
      + 'A client whose access rule does not admit the user answers 403 "You do not have access to NAME" (docs/access.md).',
    body: clientFormSchema, example: { client_id: 'shop' },
    responses: { 303: redirect('To the client\'s callback with ?token='), ...formRefused, 403: pageError('Missing or wrong CSRF token, or no access to that client system (the refusal page)') },
    handle: dashboard.handle((h) => h.signIn),
    onError: dashboard.onError((h) => h.failed),
  }),
  route({
    method: 'get', path: '/account/security', tag: 'Pages', access: 'page-user', limit: 'none',
    summary: 'Account security: two-step verification on and off, recovery codes (shown once), links to password and sessions',
    responses: { 200: html('Account security') },
    handle: security.handle((h) => h.show),
  }),
  route({
    method: 'post', path: '/account/security/totp/setup', tag: 'Pages', access: 'page-user', limit: 'user', bodyType: 'form',
    summary: 'Start two-step verification: a new key, shown as QR code and text (as POST /api/user/2fa/setup)',
    responses: { 303: redirect('To /account/security#setup'), ...codeRefused },
    handle: security.handle((h) => h.setup),
    onError: security.onError((h) => h.failed(null)),
  }),
  route({
    method: 'post', path: '/account/security/totp/enable', tag: 'Pages', access: 'page-user', limit: 'user', bodyType: 'form',
    summary: 'Turn two-step verification on with a code of the new key and the current password; the recovery codes are shown once on the page it answers with',
    body: securityEnableSchema, example: { code: '123456', current_password: 'correct horse battery' },
    responses: {
      200: html('The security page with the recovery codes, shown this once (never kept in the session)'), ...codeRefused,
      401: html('The current password is wrong: the page again, the password field marked'),
      423: html('Account locked by wrong passwords: the page again, saying for how long'),
    },
    handle: security.handle((h) => h.enable),
    onError: security.onError((h) => h.failed('enable')),
  }),
  route({
    method: 'post', path: '/account/security/recovery-codes', tag: 'Pages', access: 'page-user', limit: 'user', bodyType: 'form',
    summary: 'Replace the recovery codes (confirmed with a TOTP or recovery code); the new ones are shown once',
    body: securityCodeSchema, example: { code: '123456' },
    responses: { 200: html('The security page with the new recovery codes, shown this once (never kept in the session)'), ...codeRefused, ...codeLocked },
    handle: security.handle((h) => h.regenerate),
    onError: security.onError((h) => h.failed('recovery')),
  }),
  route({
    method: 'post', path: '/account/security/totp/disable', tag: 'Pages', access: 'page-user', limit: 'user', bodyType: 'form',
    summary: 'Turn two-step verification off with a TOTP or recovery code (as POST /api/user/2fa/disable)',
    body: securityCodeSchema, example: { code: 'k7m2p-x9qre-4hvtd-wn3ca' },
    responses: { 303: redirect('To /account/security'), ...codeRefused, ...codeLocked },
    handle: security.handle((h) => h.disable),
    onError: security.onError((h) => h.failed('disable')),
  }),
  route({
    method: 'post', path: '/account/security/passkeys/:passkeyId/remove', tag: 'Pages', access: 'page-user', limit: 'user', bodyType: 'form', params: passkeyRemoveParams,
    summary: 'Remove one of the user\'s passkeys (as DELETE /api/user/passkeys/:passkeyId); adding one is the page\'s script, through the JSON ceremony (POST /api/passkeys/registration/*)',
    responses: { 303: redirect('To /account/security#passkeys'), 403: pageError('Missing or wrong CSRF token'), 404: html('No such passkey: the page again, saying so') },
    handle: security.handle((h) => h.removePasskey),
    onError: security.onError((h) => h.failed(null)),
  }),
  route({
    method: 'get', path: '/demo/callback', tag: 'Pages', access: 'page', limit: 'none',
    when: (s) => s.deps.config.NODE_ENV !== 'production',
    summary: 'Demo client callback (development only: not mounted in production)',
    responses: {
      200: html('Shows the validation result of ?token='),
      400: html('No token in the callback URL'),
      401: html('The token was refused (the page shows why)'),
      404: html('The demo client is not set up'),
      502: html('The demo client could not reach the service'),
    },
    handle: demo.handle((h) => h.callback),
  }),
];
