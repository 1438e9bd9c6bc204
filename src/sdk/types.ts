/** What the SDK's client takes and answers, and its error (re-exported by ./index.ts). */
import type { CallbackInput, InitiateLoginInput } from './sign-in.ts';

/** How to reach the service and who we are. */
export interface SsoClientOptions {
  /** The service's root URL, e.g. https://auth.example.com (API paths are appended). */
  baseUrl: string;
  clientId: string;
  clientSecret: string;
  /** A fetch implementation (default: the global fetch), e.g. one with a proxy or for tests. */
  fetch?: typeof fetch;
  /** Upper bound of one call, in milliseconds (default 10000). */
  timeoutMs?: number;
  /**
   * How many times a call that is safe to repeat (issueToken, logout) is sent again after a
   * `503 service_unavailable` (the service cannot reach its database for a moment), waiting
   * the answer's Retry-After each time (default 2). Validation is never repeated: see
   * `SsoError.isUnavailable`.
   */
  retries?: number;
  /** Upper bound of one wait between such retries, in milliseconds (default 5000). */
  maxRetryDelayMs?: number;
  /**
   * The `iss` an initiate-login request must carry (`handleInitiateLogin`): the service's
   * PUBLIC_URL. Default: `baseUrl`.
   */
  issuer?: string;
}

/** POST /api/sso/token: a single-use token and the client's callback URL carrying it. */
export interface IssuedToken {
  token: string;
  redirect_url: string;
}

/** The user a validated token names. */
export interface SsoUser {
  id: number;
  username: string;
  email: string;
  /** The token's `roles` claim: the user's roles when the token was issued (e.g. `['user']`, `['admin']`). */
  roles: string[];
  /** The user's full name; empty when none is set. */
  full_name: string;
}

/** POST /api/sso/validate: the token was accepted (and is now used up). */
export interface ValidatedToken {
  valid: true;
  user: SsoUser;
  /** Expiry of the token, UTC, `YYYY-MM-DD HH:MM:SS`. */
  expires_at: string;
}

/** POST /api/sso/logout: the user's session in the browser that signed in for the token ends, their unused tokens are invalidated. */
export interface LogoutResult {
  success: true;
  invalidated_tokens: number;
}

/** A dashboard link as POST /api/sso/links/confirm answers it. */
export interface ConfirmedLink {
  user_id: number;
  client_id: string;
  /** The name at this client system, as this client confirmed it. */
  external_username: string;
  status: 'active';
  requested_at: string;
  confirmed_at: string;
  confirmed_by: 'client' | 'admin';
}

/** A link awaiting this client's confirmation (POST /api/sso/links/pending). */
export interface PendingLink {
  user_id: number;
  /** The user's username at the authentication service. */
  account_username: string;
  /** The name they claim at this client system. */
  external_username: string;
  requested_at: string;
}

/** Reasons the service gives for refusing a token at validation. */
export const TOKEN_REJECTIONS = ['invalid_token', 'token_expired', 'token_already_used', 'token_revoked', 'ip_mismatch', 'user_inactive'] as const;
export type TokenRejection = (typeof TOKEN_REJECTIONS)[number];

/**
 * Why a browser sign-in was refused: the service refused the token, the callback carried no
 * token, or its `state` is not the one this sign-in started with, or no sign-in was started
 * (a callback this browser did not ask for; its token is left unused).
 */
export type SignInRefusal = TokenRejection | 'missing_token' | 'state_mismatch';

/** The outcome of a browser sign-in's callback. */
export type SignInResult =
  | { ok: true; user: SsoUser; expiresAt: string; state?: string; /** A sign-in this client did not start, accepted by `acceptIdpInitiated`. */ idpInitiated?: true }
  | { ok: false; reason: SignInRefusal; message: string };

/**
 * What `handleInitiateLogin` answers: where to send the browser, with the fresh `state` to keep
 * in its session first (and the checked `target_link_uri`, when one came and is allowed); or
 * a refusal when the request names another issuer.
 */
export type InitiateLoginResult =
  | { ok: true; url: string; state: string; targetLinkUri?: string }
  | { ok: false; reason: 'issuer_mismatch'; message: string };

/**
 * A call that did not succeed. `status` is the HTTP status (0 when no answer arrived), `code`
 * the service's stable error code (`invalid_client`, `user_not_found`, `token_already_used`,
 * `rate_limited`, ...; `network_error`, `timeout` or `invalid_response` on the client side).
 */
export class SsoError extends Error {
  readonly status: number;
  readonly code: string;
  /** Seconds to wait before trying again, on 429 and 503 answers. */
  readonly retryAfter?: number;
  /** The parsed error body, when there was one. */
  readonly body?: unknown;

  constructor(status: number, code: string, message: string, options: { retryAfter?: number; body?: unknown; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = 'SsoError';
    this.status = status;
    this.code = code;
    this.retryAfter = options.retryAfter;
    this.body = options.body;
  }

  /**
   * True on `503 service_unavailable`: the service could not reach its database (or Redis)
   * and did nothing it could not undo; try again after `retryAfter` seconds. issueToken and
   * logout are retried by the client itself (`retries`). A validation that fails this way
   * is not: the token may or may not have been used up, so do not treat it as a refusal —
   * tell the user to try again and start the sign-in over (a fresh token).
   */
  get isUnavailable(): boolean {
    return this.status === 503;
  }

  /** True when the service refused the token itself (as opposed to our credentials, limits or the network). */
  get isTokenRejection(): boolean {
    return (TOKEN_REJECTIONS as readonly string[]).includes(this.code);
  }
}

/** How `handleCallback` checks a callback. */
export interface CallbackOptions {
  /**
   * The `state` this browser's sign-in started with (kept in its session). When the key is
   * present, the callback must carry exactly this state, and an undefined, null or empty
   * value refuses it: a browser whose session holds no state never started a sign-in, so
   * a callback reaching it is forged (login CSRF). Leave the key out to skip the check.
   */
  expectedState?: string | null;
  /** The end user's IP: the token must be bound to it, as in `validateToken`. */
  ipAddress?: string;
  /**
   * Accept a sign-in this client did not start: the dashboard's one-click sign-in to a client
   * that registered no initiate-login URL arrives with `idp_initiated=1` and no state. Such a
   * callback then skips the state check; the token must instead be bound to the browser's
   * address, so `ipAddress` is required with this option (a TypeError otherwise). Prefer an
   * initiate-login URL and `handleInitiateLogin` (docs/sdk.md).
   */
  acceptIdpInitiated?: boolean;
}

/** The client: one object per client system, safe to share between requests. */
export interface SsoClient {
  /** Issues a token for `username`, bound to the end user's IP when `ipAddress` is given (recommended). */
  issueToken(username: string, options?: { ipAddress?: string }): Promise<IssuedToken>;
  /** Validates and consumes a token; with `ipAddress`, it must be the IP the token is bound to. */
  validateToken(token: string, options?: { ipAddress?: string }): Promise<ValidatedToken>;
  /** Ends the sign-in of the user `token` was issued to: their unused tokens die (at every client), and the browser session that signed in for it ends. */
  logout(token: string): Promise<LogoutResult>;
  /**
   * Proves a dashboard link: user `userId` of the service (the `user.id` of a validated token)
   * is `username` here. Call it once you know it, e.g. after that person signed in here with
   * this system's own password. Afterwards their dashboard tokens for this client carry
   * `username`. 404 `link_not_found` unless the user claimed exactly that name here.
   */
  confirmLink(userId: number | string, username: string): Promise<ConfirmedLink>;
  /** The dashboard links awaiting this client's confirmation, oldest first. */
  pendingLinks(): Promise<PendingLink[]>;
  /**
   * Where to send the browser to sign in: the service's `/sso/login` page for this client
   * system. Give a `state` (e.g. `newState()`, kept in the user's session) to get it back on
   * the callback and check it there.
   */
  signInUrl(options?: { state?: string }): string;
  /**
   * Handles the callback the service sends the browser to (`?token=…[&state=…]`): takes its
   * URL, its query or the token, checks `expectedState` when given, and validates (consumes)
   * the token. Answers the user, or `{ok: false, reason}` when the sign-in is refused;
   * throws SsoError for everything else (our credentials, limits, outages, the network).
   * An `expectedState` that is given but undefined, null or empty (a session that never
   * started a sign-in) refuses the callback as `state_mismatch`, its token left unused.
   */
  handleCallback(callback: CallbackInput, options?: CallbackOptions): Promise<SignInResult>;
  /**
   * Handles a request to this client's initiate-login URL (OpenID Connect third-party initiated
   * login: the dashboard's one-click sign-in sends the browser there with `?iss=…`): checks
   * `iss` against the service (`issuer`, default `baseUrl`) and starts a sign-in with a fresh
   * state. Keep `state` in the browser's session and redirect to `url`; the callback is then
   * checked with `expectedState` as usual. A `target_link_uri` is returned only when its
   * origin is `targetOrigin` (never otherwise: it would be an open redirect).
   */
  handleInitiateLogin(request: InitiateLoginInput, options?: { targetOrigin?: string }): InitiateLoginResult;
}
