import type { RequestHandler } from 'express';
import { AppError } from '../http/errors.ts';
import { clientIp, normalizeIp } from '../http/client-ip.ts';
import type { ClientRecord } from './client.ts';
import type { ClientService } from './service.ts';
import { isIpAllowed } from './allowlist.ts';

/** The client authenticated earlier in the chain by `authenticateClient`. */
export function authenticatedClient(res: { locals: Record<string, unknown> }): ClientRecord {
  return res.locals.client as ClientRecord;
}

/** Requires valid client_id and client_secret in the (validated) JSON body: 401 invalid_client. */
export function authenticateClient(clients: ClientService): RequestHandler {
  return async (_req, res, next) => {
    const body = res.locals.input as { client_id: string; client_secret: string };
    res.locals.client = await clients.authenticateClient(body.client_id, body.client_secret);
    next();
  };
}

/**
 * Admits only callers inside the authenticated client's allow list: 403 ip_not_allowed.
 * Runs after authentication, so an unknown client_id learns nothing from a 403.
 */
export const requireAllowedIp: RequestHandler = (req, res, next) => {
  const client = authenticatedClient(res);
  const ip = clientIp(req);
  if (!isIpAllowed(normalizeIp(ip), client.allowed_ips)) {
    throw new AppError(403, 'ip_not_allowed', `IP address ${ip} is not allowed for this client`);
  }
  next();
};
