import { type RequestHandler, Router } from 'express';
import type { AuthService } from '../auth/service.ts';
import type { ClientService } from '../clients/service.ts';
import type { Db } from '../db/db.ts';
import type { LinkService } from '../links/service.ts';
import { noStore } from '../http/no-store.ts';
import { formBody as formBodyParser } from '../http/text-guard.ts';
import { validateBody } from '../http/validate.ts';
import type { SsoService } from '../sso/service.ts';
import { requireCsrf } from './csrf.ts';
import { accountSecurityHandlers } from './account-security.ts';
import { dashboardHandlers, requirePageUser } from './dashboard.ts';
import { demoCallback } from './demo.ts';
import { loginHandlers } from './login.ts';
import { clientTarget, serviceTarget } from './login-target.ts';
import { clientFormSchema, linkFormSchema, loginFormSchema, securityCodeSchema } from './schemas.ts';

/** HTML forms post urlencoded bodies; small ones, flat fields only. */
const formBody = formBodyParser({ parameterLimit: 20 });

/**
 * The server-rendered pages: sign-in for client systems (/sso/login) and for this service
 * (/login), sign-out, the user dashboard, and (outside production) the demo client's
 * callback page. Every answer is no-store; every state-changing form is CSRF-checked.
 * `loginLimit` is the per-IP limit shared with the API's login endpoints.
 */
export function pageRoutes(deps: {
  db: Db;
  links: LinkService;
  auth: AuthService;
  sso: SsoService;
  clients: ClientService;
  loginLimit: RequestHandler;
  /** The per-user limit of user management: also guards the code checks of the security page. */
  userLimit: RequestHandler;
  lockMinutes: number;
  dataDir: string;
  demo: boolean;
}): Router {
  const { loginLimit, userLimit } = deps;
  const login = loginHandlers(deps);
  const dashboard = dashboardHandlers(deps);
  const security = accountSecurityHandlers(deps);
  const code = validateBody(securityCodeSchema);
  const forClient = { query: clientTarget(deps.clients, 'query'), body: clientTarget(deps.clients, 'body') };
  const r = Router();

  r.get('/', (_req, res) => res.redirect(303, '/dashboard'));

  r.get('/sso/login', noStore, forClient.query, login.show);
  r.post('/sso/login', noStore, formBody, forClient.body, loginLimit, requireCsrf, validateBody(loginFormSchema), login.submit, login.failed);
  r.get('/login', noStore, serviceTarget, login.show);
  r.post('/login', noStore, formBody, serviceTarget, loginLimit, requireCsrf, validateBody(loginFormSchema), login.submit, login.failed);
  r.get('/sso/logout', noStore, login.logout);

  r.get('/dashboard', noStore, requirePageUser, dashboard.show);
  r.post('/dashboard/link', noStore, formBody, requirePageUser, requireCsrf, validateBody(linkFormSchema), dashboard.link, dashboard.failed);
  r.post('/dashboard/unlink', noStore, formBody, requirePageUser, requireCsrf, validateBody(clientFormSchema), dashboard.unlink, dashboard.failed);
  r.post('/dashboard/sign-in', noStore, formBody, requirePageUser, requireCsrf, validateBody(clientFormSchema), dashboard.signIn, dashboard.failed);

  r.get('/account/security', noStore, requirePageUser, security.show);
  r.post('/account/security/totp/setup', noStore, formBody, userLimit, requirePageUser, requireCsrf, security.setup, security.failed(null));
  r.post('/account/security/totp/enable', noStore, formBody, userLimit, requirePageUser, requireCsrf, code, security.enable, security.failed('enable'));
  r.post('/account/security/recovery-codes', noStore, formBody, userLimit, requirePageUser, requireCsrf, code, security.regenerate, security.failed('recovery'));
  r.post('/account/security/totp/disable', noStore, formBody, userLimit, requirePageUser, requireCsrf, code, security.disable, security.failed('disable'));

  if (deps.demo) r.get('/demo/callback', noStore, demoCallback({ dataDir: deps.dataDir }));
  return r;
}
