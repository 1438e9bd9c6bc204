import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import { lockWarning, PasswordChangeRequired } from '../auth/login-errors.ts';
import type { AuthService } from '../auth/service.ts';
import { beginPasswordChange, endSession, signOutPreviousUser } from '../auth/session.ts';
import type { ClientRecord } from '../clients/client.ts';
import { clientIp } from '../http/client-ip.ts';
import { AppError } from '../http/errors.ts';
import { input } from '../http/validate.ts';
import type { LinkService } from '../links/service.ts';
import type { PasskeyService } from '../passkeys/service.ts';
import { ACCESS_DENIED, type SsoService } from '../sso/service.ts';
import type { UserRecord } from '../users/user.ts';
import { logoUrlProblem } from '../validation/logo-url.ts';
import { destinationHost, formOf, formTargetsOf, hasLoginTarget, type LoginTarget, loginTarget, restartUrl, targetKey } from './login-target.ts';
import { forgetPendingLogin, openPendingLogin, rememberPendingLogin } from './pending-login.ts';
import { type FlashMessage, renderPage } from './render.ts';
import { loginFormSchema } from './schemas.ts';
import { completeSignIn, continueSignedIn, renderNoAccess } from './sign-in-completion.ts';
import { passkeyAssertion } from './passkey-form.ts';

/** The messages of the sign-in page. One generic message for every wrong login or password. */
const MESSAGES = {
  invalidCredentials: 'The username or password is incorrect.',
  invalidCode: 'That code is not valid. Check your authenticator app and try again.',
  reusedCode: 'That code was already used to sign in. Wait for the next code to appear in your authenticator app, then enter it.',
  rateLimited: 'Too many sign-in attempts from your network. Please wait a minute and try again.',
  expired: 'Your sign-in took too long. Please enter your username and password again.',
  missingFields: 'Enter your username and password.',
  missingCode: 'Enter the code from your authenticator app.',
  passkeyRefused: 'That passkey could not be used to sign in. Try again, or sign in with your username and password.',
};

function requestContext(req: Request) {
  return { ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null };
}

/**
 * A client as its sign-in page shows it: a logo the service would refuse (logoUrlProblem) is
 * left out. The clients table is also written by hand (seed files, psql) and the database
 * bounds the logo's length only; a same-origin address such as /sso/logout, fetched with the
 * session cookie as the page loads, ended the session holding the form's CSRF token, so nobody
 * could sign in to that client (a review helper, 2026-11-27).
 */
function pageClient(client: ClientRecord): ClientRecord {
  return client.logo_url && logoUrlProblem(client.logo_url) !== null ? { ...client, logo_url: null } : client;
}

/** Renders the sign-in page for `target` at one of its two steps. */
function renderLogin(
  req: Request,
  res: Response,
  target: LoginTarget,
  view: { step: 'password' | 'totp'; login?: string; pendingKey?: string; status?: number; error?: string },
): void {
  const { action, hidden } = formOf(target);
  const flash: FlashMessage[] = view.error ? [{ type: 'error', text: view.error }] : [];
  renderPage(req, res, 'login', {
    step: view.step,
    client: target.kind === 'service' ? null : pageClient(target.client),
    action,
    hidden: view.step === 'totp' ? { ...hidden, pending_key: view.pendingKey ?? '' } : hidden,
    login: view.login ?? '',
    restartUrl: restartUrl(target),
    destination: destinationHost(target),
  }, {
    status: view.status,
    flash,
    formTargets: formTargetsOf(target),
  });
}

/** GET/POST /sso/login (client systems) and /login (this service's dashboard); GET /sso/logout. */
export function loginHandlers(deps: { auth: AuthService; sso: SsoService; links: Pick<LinkService, 'find'>; passkeys: Pick<PasskeyService, 'signIn'> }) {
  const { auth, sso, links, passkeys } = deps;

  /** The form, unless this browser is signed in already: then on at once (single sign-on). */
  const show: RequestHandler = async (req, res) => {
    const target = loginTarget(res);
    const user = res.locals.authMethod === 'session' ? (res.locals.user as UserRecord | undefined) : undefined;
    // prompt=login and an exceeded max_age ask for the password again, signed in or not
    if (user && !(target.kind === 'oidc' && target.forceLogin)) return continueSignedIn(req, res, { sso, links }, target, user, req.session.twoFactorUsed === true);
    renderLogin(req, res, target, { step: 'password' });
  };

  /**
   * Step one checks login and password; step two the code, with the pending sign-in. A user
   * who must change their password gets a restricted session and the change form instead,
   * and the sign-in continues from there once the password is new.
   */
  const submit: RequestHandler = async (req, res, next) => {
    try {
      await submitSteps(req, res, next);
    } catch (err) {
      if (!(err instanceof PasswordChangeRequired)) throw err;
      forgetPendingLogin(req);
      const target = loginTarget(res);
      // the restricted session replaces this browser's: whoever was signed in here is signed out
      await signOutPreviousUser(req, auth, { id: err.userId }, { ...requestContext(req), via: 'page' });
      await beginPasswordChange(req, {
        userId: err.userId, twoFactorUsed: err.twoFactorUsed, next: restartUrl(target),
        formTargets: formTargetsOf(target),
      });
      res.redirect(303, '/account/password');
    }
  };

  const submitSteps: RequestHandler = async (req, res) => {
    const target = loginTarget(res);
    const form = input(res, loginFormSchema);
    // a client system's sign-in is refused, once the credentials are right, to a user its rule does not admit
    const ctx = { ...requestContext(req), via: 'page' as const, ...(target.kind === 'client' || target.kind === 'oidc' ? { forClient: target.client } : {}) };
    let result: { user: UserRecord; twoFactorUsed: boolean; credentialsVersion: string };
    if (form.step === 'passkey') {
      // a user-verified passkey is both factors: no code is asked for (src/passkeys/service.ts)
      result = await passkeys.signIn(passkeyAssertion(form.passkey), ctx);
    } else if (form.step === 'password') {
      try {
        result = await auth.login({ login: form.login, password: form.password, ...ctx });
      } catch (err) {
        if (!(err instanceof AppError && err.code === 'totp_required')) throw err;
        const pendingKey = rememberPendingLogin(req, form.login, form.password, targetKey(target));
        return renderLogin(req, res, target, { step: 'totp', pendingKey });
      }
    } else {
      const pending = openPendingLogin(req, form.pending_key, targetKey(target));
      if (!pending) {
        forgetPendingLogin(req);
        return renderLogin(req, res, target, { step: 'password', status: 400, error: MESSAGES.expired });
      }
      result = await auth.login({ login: pending.login, password: pending.password, totp: form.code, ...ctx });
    }
    await completeSignIn(req, res, { auth, sso, links }, target, result);
  };

  /**
   * Failures stay on the sign-in page with their status: 401 wrong credentials (one
   * message; the attempt that locks adds that the account is now locked, for how long), 423 locked (minutes left), 429 rate limited, 403 stale form, 400 empty fields;
   * a wrong code keeps the second step. Anything else (an unknown client system) goes on to
   * the error page.
   */
  const failed: ErrorRequestHandler = (err, req, res, next) => {
    if (!(err instanceof AppError) || !hasLoginTarget(res)) return next(err);
    const target = loginTarget(res);
    const body = (req.body ?? {}) as Record<string, unknown>;
    const pendingKey = typeof body.pending_key === 'string' ? body.pending_key : undefined;
    const secondStep = body.step === 'totp' && pendingKey !== undefined && openPendingLogin(req, pendingKey, targetKey(target)) !== null;
    const login = typeof body.login === 'string' ? body.login.slice(0, 200) : (req.session?.pendingLogin?.login ?? '');
    for (const [name, value] of Object.entries(err.headers)) res.setHeader(name, value);
    const again = (error: string, keepSecondStep: boolean) => {
      if (keepSecondStep && secondStep) return renderLogin(req, res, target, { step: 'totp', pendingKey, status: err.status, error });
      forgetPendingLogin(req);
      renderLogin(req, res, target, { step: 'password', login, status: err.status, error });
    };
    // the attempt before the lock says so: the same for unknown names, whose counter runs too
    const warning = lockWarning(err);
    if (err.code === ACCESS_DENIED && target.kind !== 'service') {
      forgetPendingLogin(req);
      // OpenID Connect: the refusal goes to the client's redirect URI, as OAuth has it
      return target.kind === 'oidc' ? target.deny(req, res, err.message) : renderNoAccess(req, res, target.client, login);
    }
    switch (err.code) {
      case 'invalid_credentials': return again(MESSAGES.invalidCredentials + warning, false);
      case 'passkey_refused': return again(MESSAGES.passkeyRefused + warning, false);
      case 'invalid_totp': return again(MESSAGES.invalidCode + warning, true);
      case 'totp_reused': return again(MESSAGES.reusedCode + warning, true);
      // the locking attempt is its own refusal above, with the service's "now locked for 30 minutes"
      case 'account_locked': return again(err.message, false);
      case 'rate_limited': return again(MESSAGES.rateLimited, true);
      case 'invalid_csrf_token': return again(err.message, false);
      case 'validation_error':
        if (body.step === 'passkey') return again(MESSAGES.passkeyRefused, false);
        return again(body.step === 'totp' ? MESSAGES.missingCode : MESSAGES.missingFields, true);
      default: return next(err);
    }
  };

  /** Ends the session and invalidates the user's unused SSO tokens; always shows "signed out". */
  const logout: RequestHandler = async (req, res) => {
    const userId = req.session?.userId;
    if (typeof userId === 'number') {
      // this session's row goes in the sign-out's transaction, before its tokens are invalidated
      await auth.logoutUser({ userId, ...requestContext(req), via: 'page', endSessionId: req.sessionID });
    }
    await endSession(req);
    res.locals.user = undefined;
    renderPage(req, res, 'signed-out', {}, { csrf: false });
  };

  return { show, submit, failed, logout };
}
