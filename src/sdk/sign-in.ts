/**
 * The browser flow of a client system (docs/api.md, "Browser sign-in and the dashboard"): send the
 * browser to the service's sign-in page, and read the callback it comes back with. Only
 * node:crypto and the URL globals, like the rest of the SDK.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';

/** The longest `state` the sign-in page accepts; it must hold no control characters either. */
export const MAX_STATE_LENGTH = 1024;

/**
 * The service's sign-in page for client system `clientId`:
 * `<baseUrl>/sso/login?client_id=<clientId>[&state=<state>]`. After the sign-in the service
 * sends the browser to the client's registered callback with `?token=…[&state=…]`.
 */
export function buildSignInUrl(baseUrl: string, clientId: string, state?: string): string {
  if (state !== undefined && (state.length === 0 || state.length > MAX_STATE_LENGTH || /\p{Cc}/u.test(state))) {
    throw new TypeError(`state must be 1 to ${MAX_STATE_LENGTH} characters without control characters`);
  }
  const url = new URL(`${baseUrl.replace(/\/+$/, '')}/sso/login`);
  url.searchParams.set('client_id', clientId);
  if (state !== undefined) url.searchParams.set('state', state);
  return url.toString();
}

/** A fresh unguessable `state` (32 random bytes, base64url): keep it in the user's session. */
export function newState(): string {
  return randomBytes(32).toString('base64url');
}

/**
 * What the callback can be given as: its URL (absolute, or the path and query as Express's
 * `req.originalUrl` has it), the query (`URLSearchParams`, or an object such as Express's
 * `req.query`), or the token itself.
 */
export type CallbackInput = string | URL | URLSearchParams | { token?: unknown; state?: unknown; idp_initiated?: unknown };

/**
 * The token and state a callback carries (either may be missing), and `idpInitiated: true`
 * when it says it is a sign-in the service started (the dashboard's one-click sign-in to a
 * client without an initiate-login URL: `idp_initiated=1`, no state).
 */
export function readCallback(input: CallbackInput): { token?: string; state?: string; idpInitiated?: true } {
  const from = (params: URLSearchParams) => ({
    token: params.get('token') ?? undefined, state: params.get('state') ?? undefined,
    ...(params.get('idp_initiated') === '1' ? { idpInitiated: true as const } : {}),
  });
  if (input instanceof URL) return from(input.searchParams);
  if (input instanceof URLSearchParams) return from(input);
  if (typeof input === 'string') {
    // a JWT is three base64url parts: no '/', '?' or ':'; anything else is a URL
    if (/[/?:]/.test(input)) return from(new URL(input, 'http://callback.invalid').searchParams);
    return { token: input || undefined };
  }
  const one = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
  return { token: one(input.token), state: one(input.state), ...(input.idp_initiated === '1' ? { idpInitiated: true as const } : {}) };
}

/** What an initiate-login request can be given as: its URL or path, or its query (as CallbackInput). */
export type InitiateLoginInput = string | URL | URLSearchParams | { iss?: unknown; target_link_uri?: unknown };

/** `iss` and `target_link_uri` of an initiate-login request (OpenID Connect third-party initiated login). */
export function readInitiateLogin(input: InitiateLoginInput): { iss?: string; targetLinkUri?: string } {
  const one = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
  const from = (p: URLSearchParams) => ({ iss: one(p.get('iss')), targetLinkUri: one(p.get('target_link_uri')) });
  if (input instanceof URL) return from(input.searchParams);
  if (input instanceof URLSearchParams) return from(input);
  if (typeof input === 'string') return from(new URL(input, 'http://initiate.invalid').searchParams);
  return { iss: one(input.iss), targetLinkUri: one(input.target_link_uri) };
}

/** An issuer URL compared as the service writes it: no trailing slash. */
export function sameIssuer(a: string, b: string): boolean {
  return a.replace(/\/+$/, '') === b.replace(/\/+$/, '');
}

/** Whether a callback's token could be one the service issued: a compact JWS (three base64url parts) it would read (at most 8192 characters). */
export function couldBeToken(token: string): boolean {
  return token.length <= 8192 && /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(token);
}

/** Compares two states in constant time. */
export function sameState(expected: string, given: string | undefined): boolean {
  if (given === undefined) return false;
  const a = Buffer.from(expected);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}
