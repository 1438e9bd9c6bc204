import type { Request, Response } from 'express';
import type { AuthChannel, AuthService } from '../auth/service.ts';
import { establishSession, signOutPreviousUser } from '../auth/session.ts';
import { callbackWithToken } from '../clients/callback.ts';
import type { ClientRecord } from '../clients/client.ts';
import { clientIp } from '../http/client-ip.ts';
import { AppError } from '../http/errors.ts';
import type { LinkService } from '../links/service.ts';
import { ACCESS_DENIED, SESSION_ENDED, type SsoService } from '../sso/service.ts';
import type { UserRecord } from '../users/user.ts';
import { type LoginTarget, restartUrl } from './login-target.ts';
import { renderPage } from './render.ts';

/** A sign-in whose checks passed: by password (and code), by passkey, or by any other method. */
export interface CompletedSignIn {
  user: UserRecord;
  /** Both factors were proven (a TOTP code, or a user-verified passkey): the session and user.login say so. */
  twoFactorUsed: boolean;
  /** The version of the credentials the sign-in saw (the session carries it). */
  credentialsVersion: string;
}

function requestContext(req: Request) {
  return { ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null };
}

/**
 * The page for a user a client system's access rule refuses (docs/access.md): 403, no token,
 * no redirect; the refusal is audited where it was decided.
 */
export function renderNoAccess(req: Request, res: Response, client: Pick<ClientRecord, 'client_name'>, username?: string): void {
  renderPage(req, res, 'no-access', { clientName: client.client_name, username: username ?? null }, { status: 403, csrf: false });
}

/**
 * Sends the signed-in browser on: for a client system, a fresh single-use token and a 303 to
 * its registered callback (never a URL from the request). A browser whose session ended
 * while the token was being issued (signed out in another tab, or everywhere) gets no
 * token: it goes to the sign-in page for that client system instead.
 */
export async function sendToClient(
  req: Request,
  res: Response,
  sso: Pick<SsoService, 'issueForUser'>,
  client: ClientRecord,
  user: UserRecord,
  options: { state?: string; twoFactorUsed: boolean; claimUsername?: string; flow: string; idpInitiated?: boolean },
): Promise<void> {
  let token: string;
  try {
    ({ token } = await sso.issueForUser(client, user, {
      ...requestContext(req),
      flow: options.flow,
      twoFactorUsed: options.twoFactorUsed,
      claimUsername: options.claimUsername,
      // the client system's logout with this token ends this browser's session (POST /api/sso/logout)
      sessionId: req.session?.userId === user.id ? req.sessionID : undefined,
    }));
  } catch (err) {
    if (err instanceof AppError && err.code === ACCESS_DENIED) return renderNoAccess(req, res, client, user.username);
    if (!(err instanceof AppError && err.code === SESSION_ENDED)) throw err;
    return res.redirect(303, restartUrl({ kind: 'client', client, state: options.state }));
  }
  // the token is in the URL: no cache may keep this answer, no Referer may carry it on
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Referrer-Policy', 'no-referrer');
  // a sign-in the client did not start carries no state: `idp_initiated=1` says so, for the
  // SDK (handleCallback's acceptIdpInitiated, docs/sdk.md) and any client that checks state
  const url = callbackWithToken(client.callback_url, token, options.state);
  res.redirect(303, options.idpInitiated ? `${url}&idp_initiated=1` : url);
}

/** How long a dashboard one-click sign-in waits for the client's own sign-in to arrive. */
export const DASHBOARD_HANDOFF_MS = 5 * 60_000;

/** What the end of a sign-in needs. */
export interface SignInDeps {
  auth: Pick<AuthService, 'logoutUser'>;
  sso: Pick<SsoService, 'issueForUser'>;
  links: Pick<LinkService, 'find'>;
}

/**
 * The sign-in a client started from its initiate-login URL, sent there by the dashboard's
 * one-click sign-in moments ago (used once): as the dashboard's own, the token carries the
 * user's active link name at that client.
 */
async function dashboardHandoff(
  req: Request, links: SignInDeps['links'], client: ClientRecord, user: UserRecord,
): Promise<{ flow: string; claimUsername?: string } | null> {
  const handoff = req.session?.dashboardSignIn;
  if (!handoff || handoff.clientId !== client.client_id) return null;
  delete req.session.dashboardSignIn;
  if (handoff.until < Date.now()) return null;
  const link = await links.find(user.id, client.client_id);
  return { flow: 'dashboard', ...(link?.status === 'active' ? { claimUsername: link.external_username } : {}) };
}

/**
 * Where a signed-in browser goes from the sign-in page: a client system gets its single-use
 * token, an OpenID Connect authorization request its finished interaction, this service's own
 * pages the browser.
 */
export async function continueSignedIn(
  req: Request, res: Response, deps: Pick<SignInDeps, 'sso' | 'links'>, target: LoginTarget, user: UserRecord, twoFactorUsed: boolean,
): Promise<void> {
  if (target.kind === 'client') {
    const handoff = await dashboardHandoff(req, deps.links, target.client, user);
    await sendToClient(req, res, deps.sso, target.client, user, { state: target.state, twoFactorUsed, flow: 'browser', ...handoff });
  } else if (target.kind === 'oidc') {
    await target.finish(req, res, user);
  } else {
    res.redirect(303, target.next);
  }
}

/**
 * The end of every sign-in on the sign-in page, whatever proved who the user is (password
 * and code, passkey; any later method calls this too): whoever was signed in on this browser
 * before is signed out, a new session is made (a new id: session fixation), and the browser
 * goes on to the target, for a client system with a fresh single-use token. The checks
 * (lock, active flag, audit, user.login) are the method's own, done before this.
 */
export async function completeSignIn(
  req: Request, res: Response, deps: SignInDeps,
  target: LoginTarget, signedIn: CompletedSignIn, via: AuthChannel = 'page',
): Promise<void> {
  const ctx = { ...requestContext(req), via };
  await signOutPreviousUser(req, deps.auth, signedIn.user, ctx);
  await establishSession(req, signedIn.user, { twoFactorUsed: signedIn.twoFactorUsed, credentialsVersion: signedIn.credentialsVersion });
  await continueSignedIn(req, res, deps, target, signedIn.user, signedIn.twoFactorUsed);
}
