import { Router, type Request, type RequestHandler, type Response } from 'express';
import { idParam } from '../admin/actor.ts';
import type { Actor } from '../clients/service.ts';
import { currentUser, requireAdmin } from '../http/auth-guards.ts';
import { clientIp } from '../http/client-ip.ts';
import { noStore } from '../http/no-store.ts';
import { input, queryInput, validateBody, validateQuery } from '../http/validate.ts';
import { listDeliveriesQuery, registerWebhookSchema, updateWebhookSchema } from './schemas.ts';
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
  // A malformed :id is 400 invalid_id on every route, checked before the body is
  // (so PATCH /api/webhooks/abc says what is wrong whatever the body holds).
  const id = (req: Request) => idParam(req);
  const checkId: RequestHandler = (req, _res, next) => {
    idParam(req);
    next();
  };

  const register: RequestHandler = async (req, res) => {
    res.status(201).json(await webhooks.register(input(res, registerWebhookSchema), actor(req, res)));
  };
  const list: RequestHandler = async (_req, res) => {
    res.json(await webhooks.list());
  };
  const update: RequestHandler = async (req, res) => {
    res.json(await webhooks.update(id(req), input(res, updateWebhookSchema), actor(req, res)));
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
  r.patch('/api/webhooks/:id', noStore, userLimit, requireAdmin, checkId, validateBody(updateWebhookSchema), update);
  r.delete('/api/webhooks/:id', noStore, userLimit, requireAdmin, checkId, remove);
  r.get('/api/webhooks/:id/deliveries', noStore, userLimit, requireAdmin, checkId, validateQuery(listDeliveriesQuery), deliveries);
  r.post('/api/webhooks/:id/deliveries/:delivery/redeliver', noStore, userLimit, requireAdmin, checkId, redeliver);
  return r;
}
