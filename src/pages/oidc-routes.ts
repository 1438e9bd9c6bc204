import { html, pageError, redirect } from '../openapi/operation.ts';
import { handlersFrom, route } from '../routes/declare.ts';
import { loginHandlers } from './login.ts';
import { oidcTarget } from './oidc-interaction.ts';
import { loginFormSchema } from './schemas.ts';

const login = handlersFrom((s) => loginHandlers({ auth: s.auth, sso: s.sso, links: s.links, passkeys: s.passkeys }));

/**
 * The sign-in page of an OpenID Connect authorization request (docs/openid-connect.md): the
 * provider (oidc-provider, mounted at /oidc) sends the browser here; the page is the service's
 * own sign-in page, with the same limit, lock counter and two-factor step as /sso/login.
 * The protocol endpoints themselves are oidc-provider's, listed by the discovery document
 * (GET /.well-known/openid-configuration).
 */
export const OIDC_PAGE_ROUTES = [
  route({
    method: 'get', path: '/oidc/interaction/:uid', tag: 'OpenID Connect', access: 'page', limit: 'userWhenSignedIn',
    summary: 'Sign-in page of an OpenID Connect authorization request',
    description: 'Reached from the authorization endpoint (see `/.well-known/openid-configuration`). A browser signed in at the service goes straight back to the authorization endpoint, unless `prompt=login` or `max_age` asks for a new sign-in.',
    before: (s) => [oidcTarget(s)],
    responses: { 200: html('The sign-in page'), 303: redirect('Signed in already: back to the authorization endpoint'), 400: pageError('Expired or unknown sign-in (`interaction_expired`), or an unknown client') },
    handle: login.handle((h) => h.show),
  }),
  route({
    method: 'post', path: '/oidc/interaction/:uid', tag: 'OpenID Connect', access: 'page', limit: 'login', bodyType: 'form',
    summary: 'Submit the sign-in form of an OpenID Connect authorization request (password step, then two-factor step)',
    body: loginFormSchema,
    example: { step: 'password', login: 'alice', password: 'correct horse battery' },
    before: (s) => [oidcTarget(s)],
    responses: {
      303: redirect('Signed in: back to the authorization endpoint, which redirects to the client with `code`'),
      200: html('Two-factor step'), 400: pageError('Expired sign-in or an invalid form'), 401: html('Invalid credentials'),
      403: pageError('Missing or wrong CSRF token'), 423: html('Account locked'), 429: pageError('Rate limited'),
    },
    handle: login.handle((h) => h.submit),
    onError: login.onError((h) => h.failed),
  }),
];
