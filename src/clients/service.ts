import { writeAudit } from '../audit/writer.ts';
import type { Deps } from '../deps.ts';
import { AppError } from '../http/errors.ts';
import { logoUrlProblem } from '../pages/logo-url.ts';
import { isAllowEverything, normalizeAllowList } from './allowlist.ts';
import { generateClientId, generateClientSecret, hashClientSecret, maskSecret, secretMatchesAny } from './credentials.ts';
import { createLookupLoader } from '../db/batch.ts';
import { type ClientRecord, findClient, findClients, insertClient, listClients, updateClient, updateClientSecret } from './queries.ts';

/** Who made an administrative change, for the audit log. */
export interface Actor {
  userId?: number | null;
  username?: string | null;
  ipAddress?: string | null;
  userAgent?: string | null;
  via: 'cli' | 'admin_api' | 'admin_panel';
}

/** A client as shown to administrators: the secret masked. */
export interface PublicClient {
  client_id: string;
  client_name: string;
  client_secret: string;
  callback_url: string;
  allowed_ips: string[];
  logo_url: string | null;
  active: boolean;
  created_at: string;
  updated_at: string;
  /** Until when the secret a rotation replaced still works (ISO 8601); null when none does. */
  previous_secret_expires_at: string | null;
}

export function toPublicClient(c: ClientRecord): PublicClient {
  return {
    client_id: c.client_id,
    client_name: c.client_name,
    client_secret: maskSecret(c.secret_last4),
    callback_url: c.callback_url,
    allowed_ips: c.allowed_ips,
    logo_url: c.logo_url ?? null,
    active: c.active,
    created_at: new Date(c.created_at).toISOString(),
    updated_at: new Date(c.updated_at).toISOString(),
    previous_secret_expires_at: c.previous_secret_expires_at ? new Date(c.previous_secret_expires_at).toISOString() : null,
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
export function createClientService(deps: Pick<Deps, 'db' | 'outbox' | 'config'>) {
  const { db, outbox } = deps;
  const production = deps.config.NODE_ENV === 'production';
  /** Credential checks arriving together read their clients in one statement (src/db/batch.ts). */
  const credentialLookup = createLookupLoader((ids: string[]) => findClients(db, ids), (c) => c.client_id);

  return {
    /** Registers a client system; the plain secret is returned here and never again. */
    async createClient(
      input: { name: string; callbackUrl: string; allowedIps?: string[]; clientId?: string; allowEverything?: boolean; logoUrl?: string | null },
      actor: Actor,
    ): Promise<{ client: ClientRecord; secret: string }> {
      const callbackUrl = checkCallbackUrl(input.callbackUrl, { production });
      const allowedIps = checkAllowList(input.allowedIps ?? [], { allowEverything: input.allowEverything });
      const logoUrl = checkLogoUrl(input.logoUrl);
      const clientId = input.clientId ?? generateClientId(input.name);
      const secret = generateClientSecret();
      const client = await db.transaction(async (tx) => {
        if (await findClient(tx, clientId)) throw new AppError(409, 'client_exists', `Client ${clientId} already exists`);
        const created = await insertClient(tx, {
          clientId,
          clientName: input.name,
          secretHash: hashClientSecret(secret),
          secretLast4: secret.slice(-4),
          callbackUrl,
          allowedIps,
          logoUrl,
        });
        await writeAudit(tx, { action: 'client.create', outcome: 'success', clientId, ...actorAudit(actor) });
        await outbox.enqueue(tx, 'client.registered', { client_id: clientId, client_name: input.name });
        return created;
      });
      outbox.wake();
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
      const client = await db.transaction(async (tx) => {
        const updated = await updateClientSecret(tx, clientId, { hash: hashClientSecret(secret), last4: secret.slice(-4), graceSeconds });
        if (!updated) throw new AppError(404, 'client_not_found', `No client ${clientId}`);
        const base = actorAudit(actor);
        await writeAudit(tx, {
          action: 'client.rotate_secret', outcome: 'success', clientId, ...base,
          details: {
            ...base.details,
            grace_seconds: graceSeconds,
            previous_secret_expires_at: updated.previous_secret_expires_at ? new Date(updated.previous_secret_expires_at).toISOString() : null,
          },
        });
        return updated;
      });
      return { client, secret };
    },

    /** Changes name, callback URL, allow list or active flag of a client. */
    async updateClient(
      clientId: string,
      patch: { clientName?: string; callbackUrl?: string; allowedIps?: string[]; active?: boolean; allowEverything?: boolean; logoUrl?: string | null },
      actor: Actor,
    ): Promise<ClientRecord> {
      const changes = {
        clientName: patch.clientName,
        callbackUrl: patch.callbackUrl === undefined ? undefined : checkCallbackUrl(patch.callbackUrl, { production }),
        allowedIps: patch.allowedIps === undefined ? undefined : checkAllowList(patch.allowedIps, patch),
        active: patch.active,
        logoUrl: patch.logoUrl === undefined ? undefined : checkLogoUrl(patch.logoUrl),
      };
      return db.transaction(async (tx) => {
        const updated = await updateClient(tx, clientId, changes);
        if (!updated) throw new AppError(404, 'client_not_found', `No client ${clientId}`);
        const changed: Record<string, unknown> = Object.fromEntries(Object.entries(changes).filter(([, v]) => v !== undefined));
        // a data: logo can be kilobytes: the log names the change, not the image
        if (typeof changes.logoUrl === 'string' && changes.logoUrl.startsWith('data:')) changed.logoUrl = `data: image, ${changes.logoUrl.length} characters`;
        await writeAudit(tx, { action: 'client.update', outcome: 'success', clientId, ...actorAudit(actor), details: { ...actorAudit(actor).details, changed } });
        return updated;
      });
    },

    listClients: () => listClients(db),
    findClient: (clientId: string) => findClient(db, clientId),

    /**
     * The client whose id and secret these are, if active; otherwise 401 invalid_client, the
     * same answer for an unknown id and a wrong secret (and the same hashing work).
     */
    async authenticateClient(clientId: string, secret: string): Promise<ClientRecord> {
      const client = await credentialLookup.load(clientId);
      // the previous secret is only there while its grace lasts (see the query)
      const ok = secretMatchesAny(secret, [client?.secret_hash ?? UNKNOWN_CLIENT_HASH, client?.previous_secret_hash ?? null]);
      if (!client || !ok || !client.active) {
        throw new AppError(401, 'invalid_client', 'Invalid client credentials');
      }
      return client;
    },
  };
}

export type ClientService = ReturnType<typeof createClientService>;

const UNKNOWN_CLIENT_HASH = hashClientSecret('no such client');

function actorAudit(actor: Actor) {
  return {
    ipAddress: actor.ipAddress ?? null,
    userAgent: actor.userAgent ?? null,
    details: { via: actor.via, actor_user_id: actor.userId ?? null, actor: actor.username ?? null },
  };
}
