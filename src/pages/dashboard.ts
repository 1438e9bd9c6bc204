import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import { CLIENT_ID, type ClientService } from '../clients/service.ts';
import { clientIp } from '../http/client-ip.ts';
import { AppError } from '../http/errors.ts';
import { input } from '../http/validate.ts';
import type { LinkService } from '../links/service.ts';
import type { SsoService } from '../sso/service.ts';
import type { UserRecord } from '../users/user.ts';
import { DASHBOARD_HANDOFF_MS, sendToClient } from './sign-in-completion.ts';
import { signInRedirect } from './login-target.ts';
import { fieldErrorsOf } from './field-errors.ts';
import { logoUrlProblem } from '../validation/logo-url.ts';
import { fieldErrorsNext, flashNext, renderPage } from './render.ts';
import { clientFormSchema, linkFormSchema } from './schemas.ts';

/**
 * Pages for signed-in people: a browser session is required (a bearer token is an API
 * credential, not a browser). Others are sent to the sign-in page, which comes back here.
 */
export const requirePageUser: RequestHandler = (req, res, next) => {
  if (res.locals.user && res.locals.authMethod === 'session') return next();
  res.redirect(303, signInRedirect(req, res, req.path));
};

function signedInUser(res: Response): UserRecord {
  return res.locals.user as UserRecord;
}

function linkContext(req: Request) {
  return { ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null };
}

/**
 * This service's address as the `iss` of an initiate-login request: PUBLIC_URL, else the
 * origin this request reached (the SDK compares it with its baseUrl).
 */
function issuerUrl(req: Request, publicUrl: string | undefined): string {
  return (publicUrl ?? `${req.protocol}://${req.get('host') ?? 'localhost'}`).replace(/\/+$/, '');
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return '';
  }
}

/** The dashboard: a launcher of the client systems the user may use, one-click sign-in, and optional username links. */
export function dashboardHandlers(deps: { links: LinkService; clients: Pick<ClientService, 'findClient'>; sso: SsoService; publicUrl?: string }) {
  const { links, clients, sso } = deps;

  const show: RequestHandler = async (req, res) => {
    const user = signedInUser(res);
    const systems = await links.dashboard(user.id);
    renderPage(req, res, 'dashboard', {
      nav: 'dashboard',
      // a logo the service would refuse is left out, as on the sign-in page (src/pages/login.ts)
      systems: systems.map((s) => ({ ...s, host: hostOf(s.callback_url), logo_url: s.logo_url && logoUrlProblem(s.logo_url) === null ? s.logo_url : null })),
    }, {
      // one-click sign-in ends in a redirect to a system's registered callback, or goes through
      // its initiate-login URL (form-action covers every redirect of the submission)
      formTargets: systems.flatMap((s) => [s.callback_url, ...(s.initiate_login_uri ? [s.initiate_login_uri] : [])]),
    });
  };

  /** Claims a name; it stays pending (and out of tokens) until the system or an administrator proves it. */
  const link: RequestHandler = async (req, res) => {
    const user = signedInUser(res);
    const form = input(res, linkFormSchema);
    const { link: claimed, changed } = await links.request(user, form.client_id, form.external_username, linkContext(req));
    flashNext(req, claimed.status === 'active'
      ? { type: 'info', text: `Already linked: you are ${claimed.external_username} there.` }
      : { type: changed ? 'success' : 'info', text: `Link requested: ${claimed.external_username} is awaiting confirmation by that system or an administrator. Until then you sign in there as ${user.username}.` });
    res.redirect(303, '/dashboard');
  };

  /** Withdraws the user's link (pending or active); its name stops at once. */
  const unlink: RequestHandler = async (req, res) => {
    const user = signedInUser(res);
    const form = input(res, clientFormSchema);
    const removed = await links.withdraw(user, form.client_id, linkContext(req));
    flashNext(req, removed ? { type: 'success', text: 'The link was removed.' } : { type: 'info', text: 'That system was not linked.' });
    res.redirect(303, '/dashboard');
  };

  /**
   * The launcher's "Open": a token, then the 303 to the registered callback. Its `username`
   * claim is the linked name only when a link is active (proven); otherwise the user's own
   * name. A client whose access rule does not admit the user gets the refusal page (the token
   * store checks the rule as it records the token: src/sso/token-store.ts).
   */
  const signIn: RequestHandler = async (req, res) => {
    const user = signedInUser(res);
    const form = input(res, clientFormSchema);
    const client = await clients.findClient(form.client_id);
    if (!client?.active) throw new AppError(404, 'client_not_found', 'That system is not registered or no longer active.');
    const link = await links.find(user.id, client.client_id);
    if (client.initiate_login_uri) {
      // OpenID Connect third-party initiated login: the client starts its own sign-in (its own
      // state) at /sso/login, which this session makes one click; that sign-in is this one
      req.session.dashboardSignIn = { clientId: client.client_id, until: Date.now() + DASHBOARD_HANDOFF_MS };
      const to = new URL(client.initiate_login_uri);
      to.searchParams.set('iss', issuerUrl(req, deps.publicUrl));
      res.setHeader('Cache-Control', 'no-store');
      return res.redirect(303, to.toString());
    }
    // a link revoked between this read and the validation fails there (src/sso/consume-queries.ts)
    await sendToClient(req, res, sso, client, user, {
      twoFactorUsed: req.session.twoFactorUsed === true,
      ...(link?.status === 'active' ? { claimUsername: link.external_username } : {}),
      flow: 'dashboard',
      idpInitiated: true,
    });
  };

  /**
   * A refused dashboard form goes back to the dashboard with the reason; a stale or forged
   * form (CSRF) gets the error page and changes nothing, one past the per-user limit the 429 page.
   */
  const failed: ErrorRequestHandler = (err, req, res, next) => {
    // as on the security page and the panel, the per-user limit's 429 (with Retry-After) is
    // answered as such, not as a message on the dashboard (the reference documents 429)
    if (!(err instanceof AppError) || err.status >= 500 || err.status === 429 || err.code === 'invalid_csrf_token' || !req.session) return next(err);
    const details = err.extra.details as Array<{ message: string }> | undefined;
    const text = err.code === 'validation_error' && details?.[0] ? details[0].message : err.message;
    flashNext(req, { type: 'error', text });
    // the link form's field is marked on the card of the system it was for
    const clientId = (req.body as Record<string, unknown> | undefined)?.client_id;
    // only an id that could be one: the refused text itself (a NUL, say) cannot be stored in the session
    if (req.path === '/dashboard/link' && typeof clientId === 'string' && CLIENT_ID.test(clientId)) {
      const errors = fieldErrorsOf(err);
      fieldErrorsNext(req, { [`external_username:${clientId}`]: errors.external_username ?? text });
    }
    res.redirect(303, '/dashboard');
  };

  return { show, link, unlink, signIn, failed };
}
