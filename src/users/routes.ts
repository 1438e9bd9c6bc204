import { Router, type RequestHandler } from 'express';
import type { PasswordChanger, PasswordService } from '../auth/password-service.ts';
import { changePasswordSchema } from '../auth/schemas.ts';
import { publicUser, type AuthService } from '../auth/service.ts';
import { pendingPasswordChange } from '../auth/session.ts';
import type { SessionService } from '../auth/sessions.ts';
import { AppError } from '../http/errors.ts';
import { currentUser, requireUser } from '../http/auth-guards.ts';
import { clientIp } from '../http/client-ip.ts';
import { noStore } from '../http/no-store.ts';
import { input, validateBody } from '../http/validate.ts';
import { twoFactorCodeSchema } from './schemas.ts';

/**
 * The signed-in user's own resources (session or bearer access token). `userLimit` is the
 * per-user limit of user management; it runs before requireUser so anonymous callers are
 * limited (per IP) too.
 */
export function userRoutes(deps: {
  auth: AuthService; passwords: PasswordService; sessions: SessionService; userLimit: RequestHandler; loginLimit: RequestHandler;
}): Router {
  const { auth, passwords, sessions, userLimit, loginLimit } = deps;
  const r = Router();
  const ctx = (req: Parameters<RequestHandler>[0]) => ({ ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null });

  const profile: RequestHandler = (_req, res) => {
    res.json(publicUser(currentUser(res)));
  };

  const setup2fa: RequestHandler = async (req, res) => {
    res.json(await auth.twoFactor.startSetup(currentUser(res), ctx(req)));
  };

  const enable2fa: RequestHandler = async (req, res) => {
    const { code } = input(res, twoFactorCodeSchema);
    res.json({ totp_enabled: true, ...(await auth.twoFactor.enable(currentUser(res), code, ctx(req))) });
  };

  const disable2fa: RequestHandler = async (req, res) => {
    const { code } = input(res, twoFactorCodeSchema);
    await auth.twoFactor.disable(currentUser(res), code, ctx(req));
    res.json({ totp_enabled: false });
  };

  /**
   * The signed-in user (session or bearer), a must-change sign-in's restricted session, or
   * (no session) `login` with the current password: it proves who the caller is, which is
   * why this endpoint is under the login limit and a wrong password counts as a failed login.
   */
  const changePassword: RequestHandler = async (req, res) => {
    const body = input(res, changePasswordSchema);
    const user = res.locals.user ? currentUser(res) : undefined;
    const pending = user ? null : pendingPasswordChange(req);
    let who: PasswordChanger;
    if (user) who = { userId: user.id };
    else if (pending) who = { userId: pending.userId };
    else if (body.login) who = { login: body.login, totp: body.totp };
    else throw new AppError(401, 'unauthenticated', 'Sign in first, or give your login with the current password');
    const keepSid = res.locals.authMethod === 'session' ? req.sessionID : undefined;
    await passwords.change(who, body.current_password, body.new_password, { ...ctx(req), via: 'api' }, keepSid);
    if (pending) delete req.session.passwordChange;
    res.json({ success: true });
  };

  /** Every other session ends (a bearer caller: all of them), and access tokens issued so far stop working. */
  const revokeAll: RequestHandler = async (req, res) => {
    const keepSid = res.locals.authMethod === 'session' ? req.sessionID : undefined;
    res.json({ success: true, ...(await sessions.endAll(currentUser(res), { ...ctx(req), via: 'api' }, keepSid)) });
  };

  const listSessions: RequestHandler = async (req, res) => {
    const currentSid = res.locals.authMethod === 'session' ? req.sessionID : undefined;
    res.json(await sessions.list(currentUser(res).id, currentSid));
  };

  r.get('/api/user', noStore, userLimit, requireUser, profile);
  r.post('/api/user/2fa/setup', noStore, userLimit, requireUser, setup2fa);
  r.post('/api/user/2fa/enable', noStore, userLimit, requireUser, validateBody(twoFactorCodeSchema), enable2fa);
  r.post('/api/user/2fa/disable', noStore, userLimit, requireUser, validateBody(twoFactorCodeSchema), disable2fa);
  r.post('/api/user/password', noStore, loginLimit, validateBody(changePasswordSchema), changePassword);
  r.get('/api/user/sessions', noStore, userLimit, requireUser, listSessions);
  r.post('/api/user/sessions/revoke-all', noStore, userLimit, requireUser, revokeAll);
  return r;
}
