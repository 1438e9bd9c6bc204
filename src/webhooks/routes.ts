import { Router, type Request, type RequestHandler, type Response } from 'express';
import type { Actor } from '../clients/service.ts';
import { currentUser, requireAdmin } from '../http/auth-guards.ts';
import { clientIp } from '../http/client-ip.ts';
import { noStore } from '../http/no-store.ts';
import { input, queryInput, validateBody, validateQuery } from '../http/validate.ts';
import { listDeliveriesQuery, registerWebhookSchema } from './schemas.ts';
import type { WebhookService } from './service.ts';

/**
 * Webhook administration (admins, by session or bearer access token). `userLimit` is the
 * per-user limit of user management; `authenticateUser` runs globally before every router.
 */
export function webhookRoutes(deps: { webhooks: WebhookService; userLimit: RequestHandler }): Router {
  const { webhooks, userLimit } = deps;
  const r = Router();
  const actor = (req: Request, res: Response): Actor => {
    const user = currentUser(res);
    return { userId: user.id, username: user.username, ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null, via: 'admin_api' };
  };
  const id = (req: Request) => (/^\d{1,9}$/.test(String(req.params.id)) ? Number(req.params.id) : Number.NaN);

  const register: RequestHandler = async (req, res) => {
    res.status(201).json(await webhooks.register(input(res, registerWebhookSchema), actor(req, res)));
  };
  const list: RequestHandler = async (_req, res) => {
    res.json(await webhooks.list());
  };
  const remove: RequestHandler = async (req, res) => {
    await webhooks.remove(id(req), actor(req, res));
    res.status(204).end();
  };
  const deliveries: RequestHandler = async (req, res) => {
    res.json(await webhooks.deliveries(id(req), queryInput(res, listDeliveriesQuery).limit));
  };
  const redeliver: RequestHandler = async (req, res) => {
    res.status(202).json(await webhooks.redeliver(id(req), String(req.params.delivery), actor(req, res)));
  };

  r.post('/api/webhooks', noStore, userLimit, requireAdmin, validateBody(registerWebhookSchema), register);
  r.get('/api/webhooks', noStore, userLimit, requireAdmin, list);
  r.delete('/api/webhooks/:id', noStore, userLimit, requireAdmin, remove);
  r.get('/api/webhooks/:id/deliveries', noStore, userLimit, requireAdmin, validateQuery(listDeliveriesQuery), deliveries);
  r.post('/api/webhooks/:id/deliveries/:delivery/redeliver', noStore, userLimit, requireAdmin, redeliver);
  return r;
}
