import { type Request, type RequestHandler, Router } from 'express';
import { actorOf, clientIdParam, idParam } from '../admin/actor.ts';
import { authenticateClient, authenticatedClient, requireAllowedIp } from '../clients/guards.ts';
import type { ClientService } from '../clients/service.ts';
import { requireAdmin } from '../http/auth-guards.ts';
import { clientIp } from '../http/client-ip.ts';
import { noStore } from '../http/no-store.ts';
import { input, queryInput, validateBody, validateQuery } from '../http/validate.ts';
import { adminLinksQuery, confirmLinkSchema, pendingLinksSchema } from './schemas.ts';
import { type LinkService, toPublicLink } from './service.ts';

function context(req: Request) {
  return { ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null };
}

/**
 * Server-to-server link endpoints for client systems: credentials in the body and a caller on
 * the client's allow list, like POST /api/sso/token. A client only ever sees and confirms
 * links at itself: the client is the authenticated caller, never a field.
 */
export function clientLinkRoutes(deps: { links: LinkService; clients: ClientService }): Router {
  const { links, clients } = deps;
  const client = authenticateClient(clients);
  const r = Router();

  const confirm: RequestHandler = async (req, res) => {
    const body = input(res, confirmLinkSchema);
    const link = await links.confirmByClient(authenticatedClient(res).client_id, body.user_id, body.username, context(req));
    res.json(toPublicLink(link));
  };

  const pending: RequestHandler = async (_req, res) => {
    const listed = await links.list({ clientId: authenticatedClient(res).client_id, status: 'pending' }, 500);
    res.json({
      links: listed.map((l) => ({ user_id: l.user_id, account_username: l.username, external_username: l.external_username, requested_at: l.requested_at })),
    });
  };

  r.post('/api/sso/links/confirm', noStore, validateBody(confirmLinkSchema), client, requireAllowedIp, confirm);
  r.post('/api/sso/links/pending', noStore, validateBody(pendingLinksSchema), client, requireAllowedIp, pending);
  return r;
}

/** The admin API for links: list, approve, revoke (role admin, under the per-user limit). */
export function adminLinkRoutes(deps: { links: LinkService; userLimit: RequestHandler }): Router {
  const { links, userLimit } = deps;
  const r = Router();

  const list: RequestHandler = async (_req, res) => {
    const q = queryInput(res, adminLinksQuery);
    res.json(await links.list({ status: q.status, clientId: q.client_id, userId: q.user_id }, q.limit));
  };
  const approve: RequestHandler = async (req, res) => {
    res.json(toPublicLink(await links.approve(idParam(req), clientIdParam(req), actorOf(req, res, 'admin_api'))));
  };
  const revoke: RequestHandler = async (req, res) => {
    const { link, invalidatedTokens } = await links.revoke(idParam(req), clientIdParam(req), actorOf(req, res, 'admin_api'));
    res.json({ revoked: toPublicLink(link), invalidated_tokens: invalidatedTokens });
  };

  r.get('/api/admin/links', noStore, userLimit, requireAdmin, validateQuery(adminLinksQuery), list);
  r.post('/api/admin/users/:id/links/:client_id/approve', noStore, userLimit, requireAdmin, approve);
  r.delete('/api/admin/users/:id/links/:client_id', noStore, userLimit, requireAdmin, revoke);
  return r;
}
