/**
 * A small typed client for client systems of the authentication service.
 *
 *   import { createSsoClient, verifyWebhook } from '@auth-service/client';
 *   const sso = createSsoClient({ baseUrl: 'https://auth.example.com', clientId, clientSecret });
 *   res.redirect(sso.signInUrl({ state }));                 // the browser flow: sign in there,
 *   const result = await sso.handleCallback(req.originalUrl, { expectedState: state }); // back here
 *   const start = sso.handleInitiateLogin(req.originalUrl); // the dashboard's one-click sign-in
 *   if (start.ok) { req.session.ssoState = start.state; res.redirect(start.url); }
 *   const { redirect_url } = await sso.issueToken('alice', { ipAddress: endUserIp });
 *   const { user } = await sso.validateToken(tokenFromCallback, { ipAddress: endUserIp });
 *   await sso.confirmLink(user.id, localUsername); // a dashboard link, once proven here
 *
 * Self-contained (global fetch and node:crypto only): the package in sdk/ compiles this
 * directory and src/webhooks/verify.ts to JavaScript on their own (docs/contract.md, "The
 * SDK package"). Every failure is an SsoError; a refused sign-in is a value.
 */
import {
  buildSignInUrl, type CallbackInput, couldBeToken, newState, readCallback, readInitiateLogin, sameIssuer, sameState,
} from './sign-in.ts';
import {
  type CallbackOptions, type ConfirmedLink, type IssuedToken, type LogoutResult, type PendingLink, type SignInResult, type SsoClient, type SsoClientOptions,
  SsoError, type TokenRejection, type ValidatedToken,
} from './types.ts';

export { verifyWebhook, WebhookVerificationError, type WebhookEnvelope, type HeaderBag } from '../webhooks/verify.ts';
export { buildSignInUrl, newState, readCallback, readInitiateLogin, MAX_STATE_LENGTH, type CallbackInput, type InitiateLoginInput } from './sign-in.ts';
export * from './types.ts';

/** Creates a client for the service at `options.baseUrl` with this client system's credentials. */
export function createSsoClient(options: SsoClientOptions): SsoClient {
  const base = options.baseUrl.replace(/\/+$/, '');
  const doFetch = options.fetch ?? globalThis.fetch;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const retries = Math.max(0, options.retries ?? 2);
  const maxRetryDelayMs = options.maxRetryDelayMs ?? 5_000;
  const credentials = { client_id: options.clientId, client_secret: options.clientSecret };

  /** `post`, sent again after a 503 when the call is safe to repeat. */
  async function call<T>(path: string, body: Record<string, unknown>, repeatable: boolean): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await post<T>(path, body);
      } catch (err) {
        if (!repeatable || attempt >= retries || !(err instanceof SsoError) || !err.isUnavailable) throw err;
        const wait = Math.min(maxRetryDelayMs, (err.retryAfter ?? 1) * 1000);
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }

  /** No (complete) answer: `timeout` when the call's time ran out, else `network_error`; status 0. */
  function transportError(err: unknown, networkMessage: string): SsoError {
    const timedOut = (err as Error)?.name === 'TimeoutError';
    return new SsoError(0, timedOut ? 'timeout' : 'network_error', timedOut ? `No answer within ${timeoutMs} ms` : networkMessage, { cause: err });
  }

  async function post<T>(path: string, body: Record<string, unknown>): Promise<T> {
    let res: Response;
    try {
      res = await doFetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ ...credentials, ...body }),
        redirect: 'error',
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      throw transportError(err, `Could not reach ${base}`);
    }
    let text: string;
    try {
      // the signal's timeout covers the body too: headers sent, then a stall, ends here
      text = await res.text();
    } catch (err) {
      throw transportError(err, `The answer from ${base} broke off`);
    }
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (!res.ok) {
      const b = (parsed ?? {}) as { error?: unknown; message?: unknown; retry_after?: unknown };
      const retryAfter = typeof b.retry_after === 'number' ? b.retry_after : Number(res.headers.get('retry-after')) || undefined;
      throw new SsoError(
        res.status,
        typeof b.error === 'string' ? b.error : `http_${res.status}`,
        typeof b.message === 'string' ? b.message : `The service answered ${res.status}`,
        { retryAfter, body: parsed },
      );
    }
    if (parsed === undefined || typeof parsed !== 'object') {
      throw new SsoError(res.status, 'invalid_response', 'The service answered without a JSON body');
    }
    return parsed as T;
  }

  async function handleCallback(callback: CallbackInput, o: CallbackOptions = {}): Promise<SignInResult> {
    // decided by the options alone, so no callback can turn it into a throw
    if (o.acceptIdpInitiated && !o.ipAddress) throw new TypeError('acceptIdpInitiated needs ipAddress: a sign-in without state is accepted only bound to the browser\'s address');
    const { token, state, idpInitiated } = readCallback(callback);
    const unrequested = o.acceptIdpInitiated === true && idpInitiated === true && state === undefined;
    // `{expectedState: req.session.ssoState}` names the check even when the session holds no
    // state: only leaving the key out skips it, so a forged callback is not waved through.
    if ('expectedState' in o && !unrequested && (!o.expectedState || !sameState(o.expectedState, state))) {
      return { ok: false, reason: 'state_mismatch', message: 'The callback does not carry the state this sign-in started with' };
    }
    if (token === undefined) return { ok: false, reason: 'missing_token', message: 'The callback carries no token' };
    // what the service refuses as bad input before it reads a token (400 validation_error, a
    // throw) is a link someone made up: a refusal like any other forged token
    if (!couldBeToken(token)) {
      return { ok: false, reason: 'invalid_token', message: 'The callback does not carry a token this service issued' };
    }
    try {
      const validated = await client.validateToken(token, { ipAddress: o.ipAddress });
      return {
        ok: true, user: validated.user, expiresAt: validated.expires_at,
        ...(state !== undefined ? { state } : {}), ...(unrequested ? { idpInitiated: true as const } : {}),
      };
    } catch (err) {
      if (err instanceof SsoError && err.isTokenRejection) return { ok: false, reason: err.code as TokenRejection, message: err.message };
      throw err;
    }
  }

  const client: SsoClient = {
    // A repeated issue at worst leaves an extra token that expires unused; a repeated logout changes nothing.
    issueToken: (username, o = {}) => call<IssuedToken>('/api/sso/token', { username, ...(o.ipAddress ? { ip_address: o.ipAddress } : {}) }, true),
    // Never repeated: a validation whose answer was lost may have used the token up.
    validateToken: (token, o = {}) => call<ValidatedToken>('/api/sso/validate', { token, ...(o.ipAddress ? { ip_address: o.ipAddress } : {}) }, false),
    logout: (token) => call<LogoutResult>('/api/sso/logout', { token }, true),
    // Confirming a link twice confirms it once; listing changes nothing: both safe to repeat.
    confirmLink: (userId, username) => call<ConfirmedLink>('/api/sso/links/confirm', { user_id: userId, username }, true),
    pendingLinks: async () => (await call<{ links: PendingLink[] }>('/api/sso/links/pending', {}, true)).links,
    signInUrl: (o = {}) => buildSignInUrl(base, options.clientId, o.state),
    handleCallback,
    handleInitiateLogin: (request, o = {}) => {
      const { iss, targetLinkUri } = readInitiateLogin(request);
      const issuer = options.issuer ?? base;
      if (iss === undefined || !sameIssuer(iss, issuer)) {
        return { ok: false, reason: 'issuer_mismatch', message: `The initiate-login request does not name ${issuer} as its issuer` };
      }
      const state = newState();
      let target: string | undefined;
      try {
        target = targetLinkUri !== undefined && o.targetOrigin !== undefined && new URL(targetLinkUri).origin === new URL(o.targetOrigin).origin ? targetLinkUri : undefined;
      } catch {
        target = undefined; // not a URL: left out
      }
      return { ok: true, url: buildSignInUrl(base, options.clientId, state), state, ...(target !== undefined ? { targetLinkUri: target } : {}) };
    },
  };
  return client;
}
