import { Router, type RequestHandler } from 'express';
import { authenticateClient, authenticatedClient, requireAllowedIp } from '../clients/guards.ts';
import type { AuthService } from '../auth/service.ts';
import type { ClientService } from '../clients/service.ts';
import { clientIp, normalizeIp } from '../http/client-ip.ts';
import { noStore } from '../http/no-store.ts';
import { input, validateBody } from '../http/validate.ts';
import { issueTokenSchema, logoutTokenSchema, validateTokenSchema } from './schemas.ts';
import type { SsoService } from './service.ts';

/** Marks the legacy route as superseded by /api/sso/validate. */
const legacyHeaders: RequestHandler = (_req, res, next) => {
  res.setHeader('Deprecation', 'true');
  res.setHeader('Link', '</api/sso/validate>; rel="successor-version"');
  next();
};

/**
 * Server-to-server SSO endpoints. `validationLimit` is the per-client rate limit of token
 * validation; it runs after client authentication so it is keyed by a proven client.
 */
export function ssoRoutes(deps: { sso: SsoService; clients: ClientService; auth: AuthService; validationLimit: RequestHandler }): Router {
  const { sso, clients, auth, validationLimit } = deps;
  const client = authenticateClient(clients);
  const r = Router();

  const issue: RequestHandler = async (req, res) => {
    const body = input(res, issueTokenSchema);
    const result = await sso.issueByUsername(authenticatedClient(res), body.username, {
      ipAddress: clientIp(req),
      userAgent: req.get('user-agent') ?? null,
      tokenIp: body.ip_address && normalizeIp(body.ip_address),
    });
    res.json({ token: result.token, redirect_url: result.redirect_url });
  };

  const validate: RequestHandler = async (req, res) => {
    const body = input(res, validateTokenSchema);
    res.json(await sso.validate(authenticatedClient(res), body.token, {
      ipAddress: clientIp(req),
      userAgent: req.get('user-agent') ?? null,
      expectedIp: body.ip_address && normalizeIp(body.ip_address),
    }));
  };

  /** A client system ends a user's sign-in there: that user's unused tokens for this client die. */
  const logout: RequestHandler = async (req, res) => {
    const body = input(res, logoutTokenSchema);
    const caller = authenticatedClient(res);
    const { invalidatedTokens } = await auth.logoutByClientToken(caller.client_id, body.token, {
      ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null,
    });
    res.json({ success: true, invalidated_tokens: invalidatedTokens });
  };

  r.post('/api/sso/token', noStore, validateBody(issueTokenSchema), client, requireAllowedIp, issue);
  r.post('/api/sso/validate', noStore, validateBody(validateTokenSchema), client, validationLimit, validate);
  r.post('/api/validate-token', noStore, legacyHeaders, validateBody(validateTokenSchema), client, requireAllowedIp, validationLimit, validate);
  r.post('/api/sso/logout', noStore, validateBody(logoutTokenSchema), client, logout);
  return r;
}
