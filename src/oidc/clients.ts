import { randomBytes } from 'node:crypto';
import type { Request } from 'express';
import type { AdapterPayload, ClientMetadata } from 'oidc-provider';
import { isIpAllowed } from '../clients/allowlist.ts';
import type { ClientRecord } from '../clients/client.ts';
import type { ClientService } from '../clients/service.ts';
import { clientIp } from '../http/client-ip.ts';

/**
 * What oidc-provider is given as a confidential client's `client_secret`: its schema demands
 * one for client_secret_basic/post, but the secret is never compared with it (the comparison
 * is replaced, see secretCheck) and nothing else uses it: only asymmetric algorithms are
 * enabled, so no HMAC or symmetric encryption key is ever derived from it. Random per
 * process, never stored, never the client's secret or its hash.
 */
const SECRET_STAND_IN = randomBytes(32).toString('base64url');

/** The client system as an OpenID Connect client (its metadata), or undefined when it is inactive. */
export function clientMetadata(c: ClientRecord): AdapterPayload | undefined {
  if (!c.active) return undefined;
  const metadata: ClientMetadata = {
    client_id: c.client_id,
    client_name: c.client_name,
    redirect_uris: [...new Set([c.callback_url, ...c.redirect_uris])],
    post_logout_redirect_uris: c.post_logout_redirect_uris,
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    id_token_signed_response_alg: 'RS256',
    ...(c.public
      ? { token_endpoint_auth_method: 'none', application_type: 'web' }
      : { token_endpoint_auth_method: 'client_secret_basic', client_secret: SECRET_STAND_IN }),
    ...(c.backchannel_logout_uri ? { backchannel_logout_uri: c.backchannel_logout_uri, backchannel_logout_session_required: true } : {}),
  };
  return metadata as AdapterPayload;
}

/** Where a refused client authentication's reason is kept on the request, for the answer (afterAnswer in src/oidc/service.ts). */
export const IP_REFUSED = Symbol('client address not on its allow list');

/**
 * Where a failed client authentication that the failure limit refused keeps the seconds to
 * wait, for the answer: 429 with Retry-After, as /api/sso answers (afterAnswer in src/oidc/service.ts).
 */
export const FAILURES_REFUSED = Symbol('too many failed client authentications');

/** Where a failure that could not be counted (the limit's store, Redis, is down) is marked: 503, as /api/sso answers. */
export const FAILURES_UNCOUNTED = Symbol('failed client authentication not counted');

/**
 * Where the client records read for oidc-provider's metadata in this request are kept on it
 * (by client id), so the secret is checked against the row the provider was given instead of
 * a second read of it: the same row, read moments earlier in the same request.
 */
const READ_IN_REQUEST = Symbol('client records read in this request');
type WithRecords = Request & { [READ_IN_REQUEST]?: Map<string, ClientRecord | null> };

/** Keeps `client`, just read from the database, on the request being served (when there is one). */
export function rememberForRequest(req: Request | undefined, clientId: string, client: ClientRecord | null): void {
  if (!req) return;
  const records = ((req as WithRecords)[READ_IN_REQUEST] ??= new Map());
  records.set(clientId, client);
}

/**
 * The check that replaces oidc-provider's own comparison of a presented `client_secret`
 * (Client.prototype.compareClientSecret, the extension point its author points to for hashed
 * secrets: panva/node-oidc-provider#631). The service's own check decides: SHA-256 of the
 * presented secret against the stored hash (and the previous one during a rotation's grace),
 * in constant time, the same work for an unknown client, on the record the provider's metadata
 * came from in this request (rememberForRequest), or on one read now when there is none.
 * Right credentials from an address off the client's allow list are refused too; the request
 * is marked so the answer is 403, as /api/sso/token answers.
 */
export function secretCheck(clients: Pick<ClientService, 'currentClient' | 'credentialsFit'>) {
  return async (clientId: string, secret: string, req: Request | undefined): Promise<boolean> => {
    const records = (req as WithRecords | undefined)?.[READ_IN_REQUEST];
    const client = records?.has(clientId) ? records.get(clientId) ?? null : await clients.currentClient(clientId);
    if (!clients.credentialsFit(client, secret)) return false;
    if (req && !isIpAllowed(clientIp(req), client.allowed_ips)) {
      (req as Request & { [IP_REFUSED]?: string })[IP_REFUSED] = clientIp(req);
      return false;
    }
    return true;
  };
}
