import type { Actor } from '../audit/actor.ts';
import type { Deps } from '../context.ts';
import { refuseEditConflicts } from '../http/edit-conflict.ts';
import { AppError } from '../http/errors.ts';
import { generateClientId, generateClientSecret, hashClientSecret, secretMatchesAny } from './credentials.ts';
import { checkAllowList, checkCallbackUrl, checkGraceSeconds, checkInitiateLoginUri, checkLogoUrl, checkOidcFields } from './fields.ts';
import { editableValues, type ShownClient } from './shown.ts';
import { createLookupLoader } from '../db/batch.ts';
import { isUniqueViolation } from '../db/db.ts';
import { createClientCache } from './cache.ts';
import { checkAccessPatch } from './access-rule.ts';
import { type AccessPatch, findClient, findClients, insertClient, listClients, type OidcFields, setChangeActor, updateClient, updateClientSecret } from './queries.ts';
import type { ClientRecord } from './client.ts';

/** Client-system administration and the credential check of the SSO endpoints. */
export function createClientService(deps: Pick<Deps, 'db' | 'events' | 'config'>) {
  const { db, events } = deps;
  const production = deps.config.NODE_ENV === 'production';
  /** Credential checks arriving together read their clients in one statement (src/db/batch.ts). */
  const credentialLookup = createLookupLoader((ids: string[]) => findClients(db, ids), (c) => c.client_id);
  /** Clients kept in memory until the database announces a change of them (src/clients/cache.ts). */
  const cache = createClientCache(deps.config.CLIENT_CACHE ? db : {});
  /** The client's current record, read from the database (and kept, when it may be). */
  const currentClient = async (clientId: string): Promise<ClientRecord | null> => {
    const ticket = cache.ticket();
    const client = await credentialLookup.load(clientId);
    cache.remember(clientId, client, ticket);
    return client;
  };
  /** The client whose credentials these are, by its current record, or 401 invalid_client. */
  const authenticateCurrent = async (clientId: string, secret: string): Promise<ClientRecord> => {
    const client = await currentClient(clientId);
    if (!credentialsFit(client, secret)) throw new AppError(401, 'invalid_client', 'Invalid client credentials');
    return client;
  };
  /** Whether these credentials are good for this record: the same work for an unknown client. */
  const credentialsFit = (client: ClientRecord | null, secret: string): client is ClientRecord =>
    // the previous secret is only there while its grace lasts (see the query)
    secretMatchesAny(secret, [client?.secret_hash ?? UNKNOWN_CLIENT_HASH, client?.previous_secret_hash ?? null]) && client !== null && client.active;

  return {
    /** Registers a client system; the plain secret is returned here and never again. */
    async createClient(
      input: {
        name: string; callbackUrl: string; allowedIps?: string[]; clientId?: string; allowEverything?: boolean; logoUrl?: string | null;
        initiateLoginUri?: string | null;
      } & OidcFields & AccessPatch,
      actor: Actor,
    ): Promise<{ client: ClientRecord; secret: string }> {
      const callbackUrl = checkCallbackUrl(input.callbackUrl, { production });
      const allowedIps = checkAllowList(input.allowedIps ?? [], { allowEverything: input.allowEverything });
      const oidc = checkOidcFields(input, { production, allowedIps });
      const logoUrl = checkLogoUrl(input.logoUrl);
      const initiateLoginUri = checkInitiateLoginUri(input.initiateLoginUri, { production });
      if (input.clientId !== undefined && !CLIENT_ID.test(input.clientId)) {
        throw new AppError(400, 'invalid_client_id', 'client_id must be 3-64 lower-case letters, digits, _ or -, starting with a letter or digit');
      }
      const clientId = input.clientId ?? generateClientId(input.name);
      const secret = generateClientSecret();
      // the database audits the new client and enqueues client.registered (its trigger)
      const exists = () => new AppError(409, 'client_exists', `Client ${clientId} already exists`);
      const client = await refusedAsBadInput(() => db.transaction(async (tx) => {
        if (await findClient(tx, clientId)) throw exists();
        await setChangeActor(tx, changeActor(actor));
        const created = await insertClient(tx, {
          clientId,
          clientName: input.name,
          secretHash: hashClientSecret(secret),
          secretLast4: secret.slice(-4),
          callbackUrl,
          allowedIps,
          logoUrl,
          initiateLoginUri,
          ...oidc,
          ...checkAccessPatch(input),
        });
        events.written(tx); // client.registered, by the trigger
        return created;
      }).catch((err: unknown) => {
        if (isUniqueViolation(err)) throw exists(); // created by another request since the check
        throw err;
      }));
      // A public client has no secret: the hash stored is of one nobody is shown (the command
      // line, the API and the panel leave it out for a public client); OpenID Connect
      // authenticates it by nothing but PKCE.
      return { client, secret };
    },

    /**
     * Replaces a client's secret and returns the new plain secret. The old one keeps working
     * for `graceSeconds` (default 0: it fails at once), so the client system can be given
     * the new one without an outage. The audit entry records the rotation and the grace.
     */
    async rotateSecret(clientId: string, actor: Actor, options: { graceSeconds?: number } = {}): Promise<{ client: ClientRecord; secret: string }> {
      const graceSeconds = checkGraceSeconds(options.graceSeconds ?? 0);
      const secret = generateClientSecret();
      // audited by the database as client.rotate_secret
      const client = await db.transaction(async (tx) => {
        // locked: a rotation at the same moment waits, then sees this one's previous secret
        const current = await findClient(tx, clientId, { lock: true });
        if (!current) throw new AppError(404, 'client_not_found', `No client ${clientId}`);
        if (current.public) throw new AppError(409, 'public_client', `${clientId} is a public client: it has no secret to rotate`);
        // A second rotation with a grace while one is running would drop the secret the client
        // system may still use (only one previous secret is kept): finish or cancel it first.
        if (graceSeconds > 0 && current.previous_secret_hash) {
          throw new AppError(409, 'rotation_in_progress', `The previous secret of ${clientId} is still accepted until ${new Date(current.previous_secret_expires_at!).toISOString()}; rotate with grace_seconds 0 to end it, or wait`);
        }
        // the database audits it as client.rotate_secret, with the grace (see migration 0009)
        await setChangeActor(tx, { ...changeActor(actor), grace_seconds: graceSeconds });
        const updated = await updateClientSecret(tx, clientId, { hash: hashClientSecret(secret), last4: secret.slice(-4), graceSeconds });
        if (!updated) throw new AppError(404, 'client_not_found', `No client ${clientId}`);
        return updated;
      });
      return { client, secret };
    },

    /** Changes name, callback URL, initiate-login URL, allow list, logo or active flag of a client. */
    async updateClient(
      clientId: string,
      patch: {
        clientName?: string; callbackUrl?: string; allowedIps?: string[]; active?: boolean; allowEverything?: boolean; logoUrl?: string | null;
        initiateLoginUri?: string | null;
      } & OidcFields & AccessPatch,
      actor: Actor,
      shown?: ShownClient,
    ): Promise<ClientRecord> {
      const changes = {
        ...checkOidcFields(patch, { production, allowedIps: patch.allowedIps === undefined ? undefined : checkAllowList(patch.allowedIps, patch) }),
        clientName: patch.clientName,
        callbackUrl: patch.callbackUrl === undefined ? undefined : checkCallbackUrl(patch.callbackUrl, { production }),
        allowedIps: patch.allowedIps === undefined ? undefined : checkAllowList(patch.allowedIps, patch),
        active: patch.active,
        logoUrl: patch.logoUrl === undefined ? undefined : checkLogoUrl(patch.logoUrl),
        initiateLoginUri: patch.initiateLoginUri === undefined ? undefined : checkInitiateLoginUri(patch.initiateLoginUri, { production }),
        ...checkAccessPatch(patch),
      };
      // audited by the database (client.update, naming what changed), only when something did
      return refusedAsBadInput(() => db.transaction(async (tx) => {
        await setChangeActor(tx, changeActor(actor));
        if (shown) {
          // a field saved from a page that showed another value than the one it replaces (read
          // under the row's lock): two saves at once from one page cannot both go through
          const before = await findClient(tx, clientId, { lock: true });
          if (!before) throw new AppError(404, 'client_not_found', `No client ${clientId}`);
          refuseEditConflicts(shown, editableValues(before), {
            client_name: changes.clientName, callback_url: changes.callbackUrl,
            allowed_ips: changes.allowedIps?.join('\n'), logo_url: changes.logoUrl === undefined ? undefined : changes.logoUrl ?? '',
            initiate_login_uri: changes.initiateLoginUri === undefined ? undefined : changes.initiateLoginUri ?? '',
            redirect_uris: changes.redirectUris?.join('\n'), post_logout_redirect_uris: changes.postLogoutRedirectUris?.join('\n'),
            backchannel_logout_uri: changes.backchannelLogoutUri === undefined ? undefined : changes.backchannelLogoutUri ?? '',
          });
        }
        const updated = await updateClient(tx, clientId, changes);
        if (!updated) throw new AppError(404, 'client_not_found', `No client ${clientId}`);
        return updated;
      }));
    },

    /** Stops listening for client changes (the instance stops). */
    close: () => cache.close(),
    /** Whether client records are kept in memory now, and how many (src/clients/cache.ts). */
    credentialCache: () => cache.state(),

    listClients: () => listClients(db),
    findClient: (clientId: string) => findClient(db, clientId),

    /**
     * The client whose id and secret these are, if active, by its current record; otherwise
     * 401 invalid_client, the same answer for an unknown id and a wrong secret (and the same
     * hashing work).
     */
    authenticateClient: authenticateCurrent,

    /**
     * The client's current record, read from the database now (credential checks arriving
     * together share one prepared statement), for a caller that checks credentials against it
     * later in the same request with `credentialsFit`.
     */
    currentClient,

    /**
     * Whether these credentials are good for this record, read from the database in the
     * caller's request (currentClient): the same check and the same hashing work as
     * authenticateClient, without reading the row a second time.
     */
    credentialsFit,

    /**
     * The same check, served from the record kept in memory when the credentials fit it
     * (`confirmed: false`: the record may predate a change still being announced, so what
     * it lets through must be made good by the database, see src/clients/guards.ts);
     * otherwise decided on the current record (`confirmed: true`), so a refusal never rests
     * on a kept record and a new secret works at once.
     */
    async authenticateClientFast(clientId: string, secret: string): Promise<{ client: ClientRecord; confirmed: boolean }> {
      const kept = cache.get(clientId);
      if (kept && credentialsFit(kept, secret)) return { client: kept, confirmed: false };
      return { client: await authenticateCurrent(clientId, secret), confirmed: true };
    },
  };
}

export type ClientService = ReturnType<typeof createClientService>;

const UNKNOWN_CLIENT_HASH = hashClientSecret('no such client');

/** The format of client ids (also enforced by the database for new ids). */
export const CLIENT_ID = /^[a-z0-9][a-z0-9_-]{2,63}$/;

/** What the database's audit trigger records about who made a change. */
function changeActor(actor: Actor): Record<string, unknown> {
  return {
    via: actor.via,
    actor_user_id: actor.userId ?? null,
    actor: actor.username ?? null,
    ip_address: actor.ipAddress ?? null,
    user_agent: actor.userAgent?.slice(0, 512) ?? null,
  };
}

/**
 * Input the service's own checks let through but the database's (migrations/0002) refuse is
 * still bad input: 400 with the database's message, which names the value, never a 500.
 */
async function refusedAsBadInput<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if ((err as { code?: unknown }).code === '23514') throw new AppError(400, 'invalid_client', (err as Error).message);
    throw err;
  }
}
