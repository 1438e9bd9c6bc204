import { Router, type RequestHandler } from 'express';
import { clientIp } from '../http/client-ip.ts';
import { currentUser } from '../http/auth-guards.ts';
import { noStore } from '../http/no-store.ts';
import { input, validateBody } from '../http/validate.ts';
import type { PasswordService } from './password-service.ts';
import { forgotPasswordSchema, resetPasswordSchema, sessionLoginSchema, tokenLoginSchema } from './schemas.ts';
import { type AuthService, publicUser } from './service.ts';
import { endSession, establishSession } from './session.ts';

/**
 * User sign-in over the API: a session (POST /api/auth/login), an access token
 * (POST /api/login), sign-out. `loginLimit` is the per-IP limit of login endpoints.
 */
export function authRoutes(deps: { auth: AuthService; passwords: PasswordService; loginLimit: RequestHandler }): Router {
  const { auth, passwords, loginLimit } = deps;
  const r = Router();

  const sessionLogin: RequestHandler = async (req, res) => {
    const body = input(res, sessionLoginSchema);
    const { user, twoFactorUsed } = await auth.login({
      login: body.login, password: body.password, totp: body.totp,
      ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null, via: 'api',
    });
    await establishSession(req, user, { twoFactorUsed });
    res.json({ success: true, user: publicUser(user) });
  };

  const tokenLogin: RequestHandler = async (req, res) => {
    const body = input(res, tokenLoginSchema);
    const { user } = await auth.login({
      login: body.username, password: body.password, totp: body.totp,
      ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null, via: 'api_token',
    });
    res.json({ ...auth.issueAccessToken(user), user: publicUser(user) });
  };

  /** Idempotent: without a signed-in user there is nothing to end, and that is not an error. */
  const logout: RequestHandler = async (req, res) => {
    const user = res.locals.user ? currentUser(res) : undefined;
    if (user) await auth.logoutUser({ userId: user.id, ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null, via: 'api' });
    await endSession(req);
    res.json({ success: true });
  };

  /** 202 with one body whoever the name is: the lookup and the mail happen after the answer. */
  const forgot: RequestHandler = (req, res) => {
    const { login } = input(res, forgotPasswordSchema);
    passwords.requestReset(login, { ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null, via: 'api' });
    res.status(202).json({ success: true });
  };

  const reset: RequestHandler = async (req, res) => {
    const body = input(res, resetPasswordSchema);
    await passwords.reset(body.token, body.new_password, { ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null, via: 'api' });
    res.json({ success: true });
  };

  r.post('/api/auth/login', noStore, loginLimit, validateBody(sessionLoginSchema), sessionLogin);
  r.post('/api/login', noStore, loginLimit, validateBody(tokenLoginSchema), tokenLogin);
  r.post('/api/auth/logout', noStore, logout);
  r.post('/api/auth/password/forgot', noStore, loginLimit, validateBody(forgotPasswordSchema), forgot);
  r.post('/api/auth/password/reset', noStore, loginLimit, validateBody(resetPasswordSchema), reset);
  return r;
}
