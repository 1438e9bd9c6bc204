import { type RequestHandler, Router } from 'express';
import type { PasswordService } from '../auth/password-service.ts';
import type { SessionService } from '../auth/sessions.ts';
import { noStore } from '../http/no-store.ts';
import { formBody as formBodyParser } from '../http/text-guard.ts';
import { validateBody, validateQuery } from '../http/validate.ts';
import { accountHandlers } from './account.ts';
import { changePasswordFormSchema, endSessionFormSchema, forgotFormSchema, resetFormSchema, resetQuerySchema } from './account-schemas.ts';
import { requireCsrf } from './csrf.ts';
import { requirePageUser } from './dashboard.ts';
import { passwordResetHandlers } from './password-reset.ts';

const formBody = formBodyParser({ parameterLimit: 20 });

/**
 * Pages of a person's password and sessions: /account/password (change; where a must-change
 * sign-in lands), /account/sessions (end one or all), /forgot-password and /reset-password.
 * Forms are CSRF-checked; the anonymous ones share the per-IP login limit, and so does the
 * change form (it checks a password).
 */
export function accountPageRoutes(deps: { passwords: PasswordService; sessions: SessionService; loginLimit: RequestHandler }): Router {
  const { loginLimit } = deps;
  const account = accountHandlers(deps);
  const reset = passwordResetHandlers(deps);
  const r = Router();

  r.get('/account/password', noStore, account.showPassword);
  r.post('/account/password', noStore, formBody, loginLimit, requireCsrf, validateBody(changePasswordFormSchema), account.changePassword, account.passwordFailed);
  r.get('/account/sessions', noStore, requirePageUser, account.showSessions);
  r.post('/account/sessions/end', noStore, formBody, requirePageUser, requireCsrf, validateBody(endSessionFormSchema), account.endOne);
  r.post('/account/sessions/end-all', noStore, formBody, requirePageUser, requireCsrf, account.endOthers);

  r.get('/forgot-password', noStore, reset.showForgot);
  r.post('/forgot-password', noStore, formBody, loginLimit, requireCsrf, validateBody(forgotFormSchema), reset.submitForgot, reset.forgotFailed);
  r.get('/reset-password', noStore, validateQuery(resetQuerySchema), reset.showReset);
  r.post('/reset-password', noStore, formBody, loginLimit, requireCsrf, validateBody(resetFormSchema), reset.submitReset, reset.resetFailed);
  return r;
}
