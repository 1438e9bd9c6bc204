import { type RequestHandler, Router } from 'express';
import { streamAudit, toPublicAudit } from '../audit/export.ts';
import { auditPage } from '../audit/queries.ts';
import { writeAudit } from '../audit/writer.ts';
import { type ClientService, toPublicClient } from '../clients/service.ts';
import type { Db } from '../db/db.ts';
import { requireAdmin } from '../http/auth-guards.ts';
import { AppError } from '../http/errors.ts';
import { noStore } from '../http/no-store.ts';
import { input, queryInput, validateBody, validateQuery } from '../http/validate.ts';
import { actorOf, clientIdParam, idParam } from './actor.ts';
import { auditFilterOf, auditQuery, createClientSchema, createUserSchema, rotateSecretSchema, searchUsersQuery, updateClientSchema, updateUserSchema } from './schemas.ts';
import type { UserAdmin } from './users.ts';

const isoOrNull = (v: Date | string | null) => (v === null ? null : new Date(v).toISOString());

/**
 * The admin JSON API (DESIGN.md "Admin API"): client systems, users and the audit log, for
 * role admin by session or bearer access token, under the per-user limit of user management.
 */
export function adminApiRoutes(deps: { db: Db; clients: ClientService; userAdmin: UserAdmin; userLimit: RequestHandler }): Router {
  const { db, clients, userAdmin, userLimit } = deps;
  const r = Router();
  const api = (req: Parameters<RequestHandler>[0], res: Parameters<RequestHandler>[1]) => actorOf(req, res, 'admin_api');

  const clientOr404 = async (clientId: string) => {
    const client = await clients.findClient(clientId);
    if (!client) throw new AppError(404, 'client_not_found', `No client ${clientId}`);
    return client;
  };

  const listClients: RequestHandler = async (_req, res) => {
    res.json((await clients.listClients()).map(toPublicClient));
  };
  const createClient: RequestHandler = async (req, res) => {
    const body = input(res, createClientSchema);
    const { client, secret } = await clients.createClient({
      name: body.client_name, callbackUrl: body.callback_url, allowedIps: body.allowed_ips, clientId: body.client_id, allowEverything: body.allow_everything, logoUrl: body.logo_url,
    }, api(req, res));
    res.status(201).json({ ...toPublicClient(client), client_secret: secret });
  };
  const showClient: RequestHandler = async (req, res) => {
    res.json(toPublicClient(await clientOr404(clientIdParam(req))));
  };
  const updateClient: RequestHandler = async (req, res) => {
    const body = input(res, updateClientSchema);
    const client = await clients.updateClient(clientIdParam(req), {
      clientName: body.client_name, callbackUrl: body.callback_url, allowedIps: body.allowed_ips, active: body.active, allowEverything: body.allow_everything, logoUrl: body.logo_url,
    }, api(req, res));
    res.json(toPublicClient(client));
  };
  const rotateSecret: RequestHandler = async (req, res) => {
    const { grace_seconds: graceSeconds } = input(res, rotateSecretSchema);
    const { client, secret } = await clients.rotateSecret(clientIdParam(req), api(req, res), { graceSeconds });
    res.json({ client_id: client.client_id, client_secret: secret, previous_secret_expires_at: isoOrNull(client.previous_secret_expires_at) });
  };

  const listUsers: RequestHandler = async (_req, res) => {
    const q = queryInput(res, searchUsersQuery);
    res.json(await userAdmin.search(q.q, q.limit));
  };
  const createUser: RequestHandler = async (req, res) => {
    res.status(201).json(await userAdmin.create(input(res, createUserSchema), api(req, res)));
  };
  const showUser: RequestHandler = async (req, res) => {
    const id = idParam(req);
    const user = await userAdmin.get(id);
    res.json({ ...user, linked_clients: await userAdmin.links(id) });
  };
  const updateUser: RequestHandler = async (req, res) => {
    res.json(await userAdmin.update(idParam(req), input(res, updateUserSchema), api(req, res)));
  };
  const unlockUser: RequestHandler = async (req, res) => {
    res.json(await userAdmin.unlock(idParam(req), api(req, res)));
  };
  const resetTwoFactor: RequestHandler = async (req, res) => {
    res.json(await userAdmin.resetTwoFactor(idParam(req), api(req, res)));
  };

  /** A page of JSON (newest first, `next_cursor` for the next), or the whole filtered log streamed as CSV or NDJSON. */
  const audit: RequestHandler = async (req, res) => {
    const q = queryInput(res, auditQuery);
    const filter = auditFilterOf(q);
    if (q.format === 'json') {
      const page = await auditPage(db, filter, q.limit, q.cursor ? BigInt(q.cursor) : undefined);
      res.json({ entries: page.rows.map(toPublicAudit), next_cursor: page.nextCursor });
      return;
    }
    const actor = api(req, res);
    await writeAudit(db, {
      action: 'audit.export', outcome: 'success', userId: actor.userId, username: actor.username, ipAddress: actor.ipAddress, userAgent: actor.userAgent,
      details: { via: actor.via, actor: actor.username, format: q.format, filter: { ...filter } },
    });
    const stamp = new Date().toISOString().slice(0, 19).replace(/[-:]/g, '').replace('T', '-');
    res.status(200);
    res.setHeader('Content-Type', q.format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8');
    res.setHeader('Content-Disposition', `attachment; filename="audit-${stamp}.${q.format}"`);
    await streamAudit(db, filter, q.format, res);
    res.end();
  };

  r.get('/api/admin/clients', noStore, userLimit, requireAdmin, listClients);
  r.post('/api/admin/clients', noStore, userLimit, requireAdmin, validateBody(createClientSchema), createClient);
  r.get('/api/admin/clients/:client_id', noStore, userLimit, requireAdmin, showClient);
  r.patch('/api/admin/clients/:client_id', noStore, userLimit, requireAdmin, validateBody(updateClientSchema), updateClient);
  r.post('/api/admin/clients/:client_id/rotate-secret', noStore, userLimit, requireAdmin, validateBody(rotateSecretSchema), rotateSecret);
  r.get('/api/admin/users', noStore, userLimit, requireAdmin, validateQuery(searchUsersQuery), listUsers);
  r.post('/api/admin/users', noStore, userLimit, requireAdmin, validateBody(createUserSchema), createUser);
  r.get('/api/admin/users/:id', noStore, userLimit, requireAdmin, showUser);
  r.patch('/api/admin/users/:id', noStore, userLimit, requireAdmin, validateBody(updateUserSchema), updateUser);
  r.post('/api/admin/users/:id/unlock', noStore, userLimit, requireAdmin, unlockUser);
  r.post('/api/admin/users/:id/reset-2fa', noStore, userLimit, requireAdmin, resetTwoFactor);
  r.get('/api/admin/audit', noStore, userLimit, requireAdmin, validateQuery(auditQuery), audit);
  return r;
}
