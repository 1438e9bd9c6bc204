import { Router, type RequestHandler } from 'express';
import { publicUser, type AuthService } from '../auth/service.ts';
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
export function userRoutes(deps: { auth: AuthService; userLimit: RequestHandler }): Router {
  const { auth, userLimit } = deps;
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

  r.get('/api/user', noStore, userLimit, requireUser, profile);
  r.post('/api/user/2fa/setup', noStore, userLimit, requireUser, setup2fa);
  r.post('/api/user/2fa/enable', noStore, userLimit, requireUser, validateBody(twoFactorCodeSchema), enable2fa);
  r.post('/api/user/2fa/disable', noStore, userLimit, requireUser, validateBody(twoFactorCodeSchema), disable2fa);
  return r;
}
