import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import type { PasswordService } from '../auth/password-service.ts';
import { endSession, pendingPasswordChange, renewSessionAfterChange } from '../auth/session.ts';
import type { SessionService } from '../auth/sessions.ts';
import { clientIp } from '../http/client-ip.ts';
import { AppError } from '../http/errors.ts';
import { input } from '../http/validate.ts';
import type { UserRecord } from '../users/user.ts';
import { changePasswordFormSchema, endSessionFormSchema } from './account-schemas.ts';
import { wrongPassword } from './account-security.ts';
import { flashNext, renderChangedSignedOut, renderPage } from './render.ts';

function context(req: Request) {
  return { ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null, via: 'page' as const };
}

/** The signed-in browser user (session, not bearer), or undefined. */
function pageUser(res: Response): UserRecord | undefined {
  return res.locals.authMethod === 'session' ? (res.locals.user as UserRecord | undefined) : undefined;
}

/** What the form's refusal says to the person, by error code. */
function problemText(err: AppError): string {
  switch (err.code) {
    case 'invalid_credentials': return wrongPassword(err);
    case 'account_locked': return `Too many wrong passwords. Try again in ${Number(err.extra.remaining_minutes) || 1} minute(s).`;
    case 'validation_error': {
      const details = err.extra.details as Array<{ message: string }> | undefined;
      return details?.[0]?.message ?? err.message;
    }
    default: return err.message;
  }
}

/**
 * The signed-in user's account pages: change the password (also where a must-change sign-in
 * lands, with a restricted session) and the list of their sessions, to end one or all.
 */
export function accountHandlers(deps: { passwords: PasswordService; sessions: SessionService; deps: { logger: Logger } }) {
  const { passwords, sessions } = deps;
  const { logger } = deps.deps;

  /** The change is made but the browser could not stay signed in (renewSessionAfterChange): it signs in again. */
  const changedSignedOut = (req: Request, res: Response, signIn: string) => renderChangedSignedOut(req, res, { heading: 'Your password was changed', signIn });

  const renderPassword = (req: Request, res: Response, options: { status?: number; error?: string } = {}) => {
    const pending = pageUser(res) ? null : pendingPasswordChange(req);
    renderPage(req, res, 'account-password', { nav: 'account', required: pending !== null }, {
      status: options.status,
      flash: options.error ? [{ type: 'error', text: options.error }] : [],
      formTargets: pending?.formTargets,
    });
  };

  /** The change form for a signed-in user or a must-change sign-in; anyone else signs in first. */
  const showPassword: RequestHandler = (req, res) => {
    if (!pageUser(res) && !pendingPasswordChange(req)) return res.redirect(303, '/login?next=/account/password');
    renderPassword(req, res);
  };

  /**
   * Changes the password. A must-change sign-in is then signed in for real (a new session)
   * and continues where it was going; a signed-in user stays signed in here, under a new
   * session id, while every other session ends.
   */
  const changePassword: RequestHandler = async (req, res) => {
    const user = pageUser(res);
    const pending = user ? null : pendingPasswordChange(req);
    if (!user && !pending) return res.redirect(303, '/login?next=/account/password');
    const form = input(res, changePasswordFormSchema);
    if (form.new_password !== form.confirm_password) {
      return renderPassword(req, res, { status: 400, error: 'The two new passwords differ. Type the same new password twice.' });
    }
    const userId = user ? user.id : pending!.userId;
    const changed = await passwords.change({ userId }, form.current_password, form.new_password, context(req), user ? req.sessionID : undefined);
    if (pending) {
      if (!(await renewSessionAfterChange(req, changed.user, { twoFactorUsed: pending.twoFactorUsed, credentialsVersion: changed.credentialsVersion }, logger))) {
        return changedSignedOut(req, res, pending.next.startsWith('/sso/') ? pending.next : `/login?next=${encodeURIComponent(pending.next)}`);
      }
      // said on this service's next page; one going on to a client system shows none, and the
      // message would wait in the session for some later, unrelated page
      if (!pending.next.startsWith('/sso/')) flashNext(req, { type: 'success', text: 'Your password was changed. You are signed in.' });
      return res.redirect(303, pending.next);
    }
    // A new session id for this browser too, as at sign-in: an id copied before the change
    // (the one credential that survived it) is worthless after it.
    const renewal = { twoFactorUsed: req.session.twoFactorUsed === true, credentialsVersion: changed.credentialsVersion };
    if (!(await renewSessionAfterChange(req, changed.user, renewal, logger))) return changedSignedOut(req, res, '/login');
    flashNext(req, { type: 'success', text: 'Your password was changed. Every other session of yours has been signed out.' });
    res.redirect(303, '/account/password');
  };

  /** A refused change stays on the form with its status and the reason. */
  const passwordFailed: ErrorRequestHandler = (err, req, res, next) => {
    if (!(err instanceof AppError) || err.status >= 500 || err.code === 'invalid_csrf_token' || err.code === 'rate_limited') return next(err);
    if (err.code === 'unauthenticated') return res.redirect(303, '/login');
    for (const [name, value] of Object.entries(err.headers)) res.setHeader(name, value);
    renderPassword(req, res, { status: err.status, error: problemText(err) });
  };

  const showSessions: RequestHandler = async (req, res) => {
    const user = res.locals.user as UserRecord;
    renderPage(req, res, 'account-sessions', { nav: 'account', sessions: await sessions.list(user.id, req.sessionID) });
  };

  /** Ends one session; ending this browser's own signs it out. */
  const endOne: RequestHandler = async (req, res) => {
    const user = res.locals.user as UserRecord;
    const ended = await sessions.endOne(user, input(res, endSessionFormSchema).session, context(req), req.sessionID);
    if (ended?.current) {
      await endSession(req);
      return res.redirect(303, '/login');
    }
    flashNext(req, ended ? { type: 'success', text: 'That session has been signed out.' } : { type: 'info', text: 'That session had already ended.' });
    res.redirect(303, '/account/sessions');
  };

  /** Signs out every other session, access token and unused sign-in link. */
  const endOthers: RequestHandler = async (req, res) => {
    const user = res.locals.user as UserRecord;
    const result = await sessions.endAll(user, context(req), req.sessionID);
    flashNext(req, { type: 'success', text: `Signed out everywhere else (${result.ended_sessions} other session(s)).` });
    res.redirect(303, '/account/sessions');
  };

  return { showPassword, changePassword, passwordFailed, showSessions, endOne, endOthers };
}
