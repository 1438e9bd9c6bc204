import type { Request, RequestHandler, Response } from 'express';
import { isUsableCallbackUrl } from '../clients/callback.ts';
import type { ClientRecord } from '../clients/client.ts';
import type { ClientService } from '../clients/service.ts';
import { AppError } from '../http/errors.ts';
import type { UserRecord } from '../users/user.ts';
import { clientLoginTargetSchema, localNextSchema } from './schemas.ts';

/**
 * Where a sign-in continues. A client system: always its registered callback URL (only
 * `state` comes from the request, and it only rides along). This service: one of its own
 * pages (/dashboard by default).
 */
export type LoginTarget =
  | { kind: 'client'; client: ClientRecord; state?: string }
  | { kind: 'service'; next: string }
  | OidcLoginTarget;

/**
 * An OpenID Connect authorization request waiting for its sign-in (src/pages/oidc-interaction.ts):
 * the interaction `uid`, the client system, the redirect URI the provider accepted for it, and
 * how the interaction is finished for a signed-in user. `forceLogin`: prompt=login or max_age
 * asks for a new sign-in even when this browser is signed in.
 */
export interface OidcLoginTarget {
  kind: 'oidc';
  uid: string;
  client: ClientRecord;
  redirectUri: string;
  forceLogin: boolean;
  finish(req: Request, res: Response, user: UserRecord): Promise<void>;
  /** Ends the authorization request with `error=access_denied` to the client's redirect URI (OAuth 2.0, 4.1.2.1). */
  deny(req: Request, res: Response, description: string): Promise<void>;
}

const DEFAULT_NEXT = '/dashboard';

/** The target set by `clientTarget` or `serviceTarget` earlier in the chain. */
export function loginTarget(res: Response): LoginTarget {
  return res.locals.loginTarget as LoginTarget;
}

/** True once a target is known, so failures can be shown on the sign-in page itself. */
export function hasLoginTarget(res: Response): boolean {
  return res.locals.loginTarget !== undefined;
}

/**
 * The client system named by `client_id` (and its `state`) in the query string (GET) or the
 * form's hidden fields (POST). Missing, unknown, inactive or with an unusable callback URL:
 * 400 unknown_client, shown as an error page and never a redirect.
 */
export function clientTarget(clients: Pick<ClientService, 'findClient'>, source: 'query' | 'body'): RequestHandler {
  return async (req, res, next) => {
    const raw = (source === 'query' ? req.query : req.body) as Record<string, unknown> | undefined;
    const parsed = clientLoginTargetSchema.safeParse({ client_id: raw?.client_id, state: raw?.state });
    const client = parsed.success ? await clients.findClient(parsed.data.client_id) : null;
    if (!parsed.success || !client || !client.active || !isUsableCallbackUrl(client.callback_url)) {
      throw new AppError(400, 'unknown_client', parsed.success && client
        ? `The system that sent you here is not ${client.active ? 'set up correctly' : 'active'}. Please contact its administrator.`
        : 'This sign-in link does not name a registered client system. Go back to the system you came from and try again.');
    }
    res.locals.loginTarget = { kind: 'client', client, state: parsed.data.state } satisfies LoginTarget;
    next();
  };
}

/**
 * Where a page guard sends a browser that is not signed in: the sign-in page, which comes
 * back to `back` (a GET's own address), or for a form posted without a session (one that
 * ended while the form was open) to the form's page (`res.locals.signInNext`, set from the
 * route declarations by src/routes/mount.ts); the dashboard needs no `next`.
 */
export function signInRedirect(req: Request, res: Response, back: string): string {
  const next = req.method === 'GET' ? back : res.locals.signInNext as string | undefined;
  return next && next !== DEFAULT_NEXT ? `/login?next=${encodeURIComponent(next)}` : '/login';
}

/** This service's own sign-in: `next` only when it names one of its pages, else /dashboard. */
export const serviceTarget: RequestHandler = (req, res, next) => {
  const raw = ((req.method === 'GET' ? req.query : req.body) as Record<string, unknown> | undefined)?.next;
  const parsed = localNextSchema.safeParse(raw);
  res.locals.loginTarget = { kind: 'service', next: parsed.success ? parsed.data : DEFAULT_NEXT } satisfies LoginTarget;
  next();
};

/** Binds a pending two-factor sign-in to the sign-in it started in. */
export function targetKey(target: LoginTarget): string {
  if (target.kind === 'oidc') return `oidc:${target.uid}`;
  return target.kind === 'client' ? `client:${target.client.client_id}` : 'service';
}

/** What the sign-in form posts to, with the hidden fields that carry the target. */
export function formOf(target: LoginTarget): { action: string; hidden: Record<string, string> } {
  if (target.kind === 'oidc') return { action: `/oidc/interaction/${encodeURIComponent(target.uid)}`, hidden: {} };
  if (target.kind === 'client') {
    const hidden: Record<string, string> = { client_id: target.client.client_id };
    if (target.state !== undefined) hidden.state = target.state;
    return { action: '/sso/login', hidden };
  }
  return { action: '/login', hidden: target.next === DEFAULT_NEXT ? {} : { next: target.next } };
}

/** The URL that starts this sign-in over (used by "Use a different account"). */
export function restartUrl(target: LoginTarget): string {
  const { action, hidden } = formOf(target);
  const query = new URLSearchParams(hidden).toString();
  return query ? `${action}?${query}` : action;
}

/** Where the browser may be sent on after the sign-in form (its CSP form-action): the client system's URL. */
export function formTargetsOf(target: LoginTarget): string[] | undefined {
  if (target.kind === 'oidc') return [target.redirectUri];
  return target.kind === 'client' ? [target.client.callback_url] : undefined;
}

/** The host a client-system sign-in ends at, shown on the page so the user knows. */
export function destinationHost(target: LoginTarget): string | null {
  if (target.kind === 'service') return null;
  try {
    return new URL(target.kind === 'oidc' ? target.redirectUri : target.client.callback_url).host;
  } catch {
    return null;
  }
}
