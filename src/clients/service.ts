import type { Actor } from '../audit/actor.ts';
import type { Deps } from '../context.ts';
import { refuseEditConflicts } from '../http/edit-conflict.ts';
import { AppError } from '../http/errors.ts';
import { logoUrlProblem } from '../validation/logo-url.ts';
import { isAllowEverything, normalizeAllowList } from './allowlist.ts';
import { generateClientId, generateClientSecret, hashClientSecret, maskSecret, secretMatchesAny } from './credentials.ts';
import { createLookupLoader } from '../db/batch.ts';
import { isUniqueViolation } from '../db/db.ts';
import { createClientCache } from './cache.ts';
import { checkAccessPatch } from './access-rule.ts';
import { type AccessPatch, findClient, findClients, insertClient, listClients, type OidcFields, setChangeActor, updateClient, updateClientSecret } from './queries.ts';
import type { ClientRecord } from './client.ts';

/** A client as shown to administrators: the secret masked. */
export interface PublicClient {
  client_id: string;
  client_name: string;
  /** Masked; absent for a public client, which has none. */
  client_secret?: string;
  callback_url: string;
  /** Where the dashboard's one-click sign-in sends the browser to start the client's own sign-in; null: none. */
  initiate_login_uri: string | null;
  /** OpenID Connect: more redirect URIs, post-logout redirect URIs, public client, back-channel logout URI. */
  redirect_uris: string[];
  post_logout_redirect_uris: string[];
  public: boolean;
  backchannel_logout_uri: string | null;
  allowed_ips: string[];
  logo_url: string | null;
  active: boolean;
  created_at: string;
  updated_at: string;
  /** Until when the secret a rotation replaced still works (ISO 8601); null when none does. */
  previous_secret_expires_at: string | null;
  /** Who may use it (docs/access.md): both empty, every active user. */
  allow_groups: string[];
  allow_roles: string[];
  /** Shown on the dashboard's launcher. */
  listed: boolean;
}

export function toPublicClient(c: ClientRecord): PublicClient {
  return {
    client_id: c.client_id,
    client_name: c.client_name,
    ...(c.public ? {} : { client_secret: maskSecret(c.secret_last4) }),
    callback_url: c.callback_url,
    initiate_login_uri: c.initiate_login_uri ?? null,
    redirect_uris: c.redirect_uris,
    post_logout_redirect_uris: c.post_logout_redirect_uris,
    public: c.public,
    backchannel_logout_uri: c.backchannel_logout_uri,
    allowed_ips: c.allowed_ips,
    logo_url: c.logo_url ?? null,
    active: c.active,
    created_at: new Date(c.created_at).toISOString(),
    updated_at: new Date(c.updated_at).toISOString(),
    previous_secret_expires_at: c.previous_secret_expires_at ? new Date(c.previous_secret_expires_at).toISOString() : null,
    allow_groups: c.allow_groups,
    allow_roles: c.allow_roles,
    listed: c.listed,
  };
}

/** The values an editing page showed of the fields it saves, as editableValues gives them (409 edit_conflict when one has moved since). */
export type ShownClient = Partial<Record<EditableField, string>>;

type EditableField = 'client_name' | 'callback_url' | 'initiate_login_uri' | 'allowed_ips' | 'logo_url'
  | 'redirect_uris' | 'post_logout_redirect_uris' | 'backchannel_logout_uri';

/** A client's editable fields as an editing page shows them: the lists one entry a line, no logo, initiate-login or back-channel URL as ''. */
export function editableValues(c: ClientRecord): Record<EditableField, string> {
  return {
    client_name: c.client_name, callback_url: c.callback_url, initiate_login_uri: c.initiate_login_uri ?? '',
    allowed_ips: c.allowed_ips.join('\n'), logo_url: c.logo_url ?? '',
    redirect_uris: c.redirect_uris.join('\n'), post_logout_redirect_uris: c.post_logout_redirect_uris.join('\n'),
    backchannel_logout_uri: c.backchannel_logout_uri ?? '',
  };
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * A callback must be an absolute http(s) URL without credentials or a fragment. In
 * production it must be https (the token travels in its query string), except on loopback.
 */
export function checkCallbackUrl(raw: string, options: { production?: boolean } = {}): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new AppError(400, 'invalid_callback_url', 'callback_url must be an absolute http(s) URL');
  }
  if (!['http:', 'https:'].includes(url.protocol) || url.username || url.password || url.hash) {
    throw new AppError(400, 'invalid_callback_url', 'callback_url must be an absolute http(s) URL without credentials or fragment');
  }
  if (options.production && url.protocol === 'http:' && !LOOPBACK_HOSTS.has(url.hostname)) {
    throw new AppError(400, 'invalid_callback_url', 'callback_url must use https: the token travels in its query string');
  }
  return url.toString();
}

/**
 * A client's initiate-login URL as given (blank or null: none): as a callback, an absolute
 * http(s) URL without credentials or fragment (https in production, except on loopback), or
 * 400 invalid_initiate_login_uri. The database checks the same (migrations/0023).
 */
export function checkInitiateLoginUri(raw: string | null | undefined, options: { production?: boolean } = {}): string | null {
  const value = raw?.trim() ?? '';
  if (value === '') return null;
  try {
    return checkCallbackUrl(value, options);
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    throw new AppError(400, 'invalid_initiate_login_uri', err.message.replace(/^callback_url/, 'initiate_login_uri').replace('the token travels in its query string', 'the browser of a signed-in user is sent there'));
  }
}

/**
 * The OpenID Connect fields as given, each URL checked as a callback URL is (absolute http(s),
 * no fragment, https in production but on loopback); a public client has no allow list.
 */
export function checkOidcFields(input: OidcFields, options: { production: boolean; allowedIps?: string[] }): OidcFields {
  const urls = (list: string[] | undefined, field: string) => {
    if (list === undefined) return undefined;
    if (list.length > 20) throw new AppError(400, 'invalid_redirect_uri', `${field}: at most 20 URLs`);
    return [...new Set(list.map((u) => {
      try {
        return checkCallbackUrl(u, options);
      } catch (err) {
        if (err instanceof AppError) throw new AppError(400, 'invalid_redirect_uri', `${field}: ${err.message.replace(/^callback_url/, JSON.stringify(u))}`);
        throw err;
      }
    }))];
  };
  const out: OidcFields = {
    redirectUris: urls(input.redirectUris, 'redirect_uris'),
    postLogoutRedirectUris: urls(input.postLogoutRedirectUris, 'post_logout_redirect_uris'),
    public: input.public,
    backchannelLogoutUri: input.backchannelLogoutUri === undefined || input.backchannelLogoutUri === null || input.backchannelLogoutUri === ''
      ? (input.backchannelLogoutUri === undefined ? undefined : null)
      : urls([input.backchannelLogoutUri], 'backchannel_logout_uri')![0],
  };
  if (input.public && options.allowedIps && options.allowedIps.length > 0) {
    throw new AppError(400, 'invalid_allowed_ips', 'A public client (a browser or native app, no secret) has no IP allow list');
  }
  return out;
}

/** A client logo as given (blank: none), or 400 invalid_logo_url naming what is accepted. */
export function checkLogoUrl(raw: string | null | undefined): string | null {
  const value = raw?.trim() ?? '';
  if (value === '') return null;
  const problem = logoUrlProblem(value);
  if (problem) throw new AppError(400, 'invalid_logo_url', `logo_url ${problem}`);
  return value;
}

/**
 * Normalizes an allow list; refuses bad entries (naming all of them) and, unless
 * `allowEverything` is set, ranges such as 0.0.0.0/0 that would disable the protection.
 */
export function checkAllowList(entries: string[], options: { allowEverything?: boolean } = {}): string[] {
  const { entries: normalized, invalid } = normalizeAllowList(entries);
  if (invalid.length > 0) {
    throw new AppError(400, 'invalid_allowed_ips', `Not an IP address or CIDR range: ${invalid.join(', ')}`, {
      extra: { invalid },
    });
  }
  const everything = normalized.filter(isAllowEverything);
  if (everything.length > 0 && !options.allowEverything) {
    throw new AppError(400, 'allow_everything_unconfirmed', `${everything.join(', ')} admits every address; confirm to save it`, {
      extra: { entries: everything },
    });
  }
  return normalized;
}

/** The longest grace a rotated client secret can get: 30 days. */
export const MAX_GRACE_SECONDS = 30 * 86400;

/** A grace period in whole seconds, 0 to MAX_GRACE_SECONDS: 400 invalid_grace_seconds otherwise. */
export function checkGraceSeconds(value: number): number {
  if (!Number.isSafeInteger(value) || value < 0 || value > MAX_GRACE_SECONDS) {
    throw new AppError(400, 'invalid_grace_seconds', `grace_seconds must be a whole number of seconds from 0 to ${MAX_GRACE_SECONDS}`);
  }
  return value;
}

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
