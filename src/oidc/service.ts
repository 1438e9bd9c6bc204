import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request } from 'express';
import type Provider from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { createAuditBatch, writeAudit } from '../audit/writer.ts';
import type { ClientService } from '../clients/service.ts';
import type { Deps } from '../context.ts';
import { clientIp } from '../http/client-ip.ts';
import { quietly } from '../logging/logger.ts';
import { accountsFor, type AccountKey, groupsOfUser } from '../access/queries.ts';
import { createBatchLoader } from '../db/batch.ts';
import { admitSignIn } from '../access/service.ts';
import { findUserById } from '../users/queries.ts';
import { rolesOf } from '../users/roles.ts';
import type { UserRecord } from '../users/user.ts';
import type { FailureLimit } from '../http/failure-limit.ts';
import { clientMetadata, FAILURES_REFUSED, FAILURES_UNCOUNTED, IP_REFUSED, rememberForRequest, secretCheck } from './clients.ts';
import { loadOidcKeys, type SigningJwk } from './keys.ts';
import { createProvider, type ProviderParts, servingRequest } from './provider.ts';
import { revokeAccountArtefacts, revokeAccountTokens } from './queries.ts';

type Views = Pick<ProviderParts, 'renderError' | 'logoutSource' | 'postLogoutSuccessSource'> & {
  /** Ends the browser's session at the service (an RP-initiated logout was confirmed). */
  endServiceSession(req: Request): Promise<void>;
};

/**
 * The OpenID Connect provider of this service (oidc-provider), and what the rest of the
 * service asks of it: the provider itself (built on first use, with the keys), the end of a
 * user's sessions (back-channel logout) and the revocation of their tokens.
 */
export function createOidcService(deps: Pick<Deps, 'config' | 'db' | 'logger' | 'events'>, clients: ClientService) {
  const { db, logger, events } = deps;
  let provider: Provider | undefined;
  let building: Promise<Provider> | undefined;
  let handler: ((req: IncomingMessage, res: ServerResponse) => unknown) | undefined;
  let keys: SigningJwk[] | undefined;
  let views: Views | undefined;
  let cookieKeys: string[] = [];
  let failures: FailureLimit | undefined;
  const checkSecret = secretCheck(clients);

  /**
   * A wrong secret for a registered client: counted by the failure limit of the spec's own
   * endpoints (per address and client id, src/http/failure-limit.ts), and the request marked
   * for a 429 once that address has failed at that client too often. A right secret is never
   * refused here, and an unknown client id never gets this far (the provider refuses it first).
   */
  const countFailure = async (req: Request | undefined, clientId: string): Promise<void> => {
    if (!req || !failures || (req as Request & { [IP_REFUSED]?: string })[IP_REFUSED] !== undefined) return;
    const marked = req as Request & { [FAILURES_REFUSED]?: number; [FAILURES_UNCOUNTED]?: boolean };
    const address = clientIp(req);
    try {
      const wait = failures.refusedFor(address, clientId) || await failures.count(address, clientId);
      if (wait > 0) marked[FAILURES_REFUSED] = wait;
    } catch (err) {
      marked[FAILURES_UNCOUNTED] = true;
      quietly(() => logger.error({ err }, 'failed client authentication not counted'));
    }
  };

  /** The accounts the token endpoints ask for, those of requests arriving together in one statement. */
  const accounts = createBatchLoader<AccountKey, Awaited<ReturnType<typeof accountsFor>>[number]>((keys) => accountsFor(db, keys));
  const findAccount = async (id: number, clientId: string | undefined): Promise<{ user: UserRecord; roles: string[] } | undefined> => {
    if (clientId === undefined) {
      const user = await findUserById(db, id);
      return user?.active ? { user, roles: rolesOf(user, await groupsOfUser(db, id)) } : undefined;
    }
    // the client's access rule, read now with the user: a user who left the group gets nothing more (docs/access.md)
    const account = await accounts.load({ userId: id, clientId });
    return account?.admitted ? { user: account.user, roles: rolesOf(account.user, account.groups) } : undefined;
  };

  /** The token endpoints' audit rows, those of requests answered together in one statement. */
  const writeAuditRow = createAuditBatch(db);
  /** Audits what the provider did, with the caller's address; never fails the answer. */
  const audit = async (ctx: KoaContextWithOIDC, entry: Parameters<typeof writeAudit>[1]) => {
    try {
      await writeAuditRow({ ipAddress: clientIp(ctx.req as Request), userAgent: ctx.get('user-agent') || null, ...entry });
    } catch (err) {
      quietly(() => logger.error({ err }, 'OpenID Connect audit entry not written'));
    }
  };

  /**
   * After each provider answer: a confidential client's right credentials from an address off
   * its allow list become 403 (as /api/sso/token answers); sign-ins (a code issued), token
   * issues, refreshes, revocations and refused client authentications are audited; a sign-in
   * sends user.login.
   */
  const afterAnswer = async (ctx: KoaContextWithOIDC, next: () => Promise<void>) => {
    await next();
    const route = ctx.oidc?.route;
    if (!route) return;
    const req = ctx.req as Request & { [IP_REFUSED]?: string; [FAILURES_REFUSED]?: number; [FAILURES_UNCOUNTED]?: boolean };
    const clientId = ctx.oidc.client?.clientId ?? (typeof ctx.oidc.params?.client_id === 'string' ? ctx.oidc.params.client_id : null);
    if (ctx.status === 401 && (req[FAILURES_REFUSED] !== undefined || req[FAILURES_UNCOUNTED])) {
      ctx.remove('WWW-Authenticate');
      if (req[FAILURES_REFUSED] !== undefined) {
        const wait = req[FAILURES_REFUSED];
        ctx.status = 429;
        ctx.set('Retry-After', String(wait));
        ctx.body = { error: 'rate_limited', error_description: 'Too many failed client authentications for this client from this address; try again later', retry_after: wait };
      } else {
        ctx.status = 503;
        ctx.body = { error: 'temporarily_unavailable', error_description: 'The failed client authentication could not be counted; try again shortly' };
      }
      await audit(ctx, { action: 'oidc.client_auth', outcome: 'failure', clientId, details: { route, error: 'invalid_client', refused: ctx.status === 429 ? 'rate_limited' : 'limit_unavailable' } });
      return;
    }
    if (req[IP_REFUSED] !== undefined) {
      ctx.status = 403;
      ctx.remove('WWW-Authenticate');
      ctx.body = { error: 'access_denied', error_description: `IP address ${req[IP_REFUSED]} is not allowed for this client` };
      await audit(ctx, { action: 'oidc.client_auth', outcome: 'failure', clientId, details: { route, reason: 'ip_not_allowed' } });
      return;
    }
    if (route === 'end_session_confirm' && ctx.oidc.params?.logout && views) {
      await views.endServiceSession(req);
      return;
    }
    if (['token', 'introspection', 'revocation'].includes(route) && ctx.status === 401) {
      await audit(ctx, { action: 'oidc.client_auth', outcome: 'failure', clientId: clientId?.slice(0, 200) ?? null, details: { route, error: 'invalid_client' } });
      return;
    }
    const accountId = ctx.oidc.session?.accountId ?? ctx.oidc.entities?.RefreshToken?.accountId ?? ctx.oidc.entities?.AuthorizationCode?.accountId;
    const userId = accountId && /^\d+$/.test(accountId) ? Number(accountId) : null;
    if (route === 'token' && ctx.status === 200) {
      const grantType = String(ctx.oidc.params?.grant_type ?? '');
      await audit(ctx, { action: grantType === 'refresh_token' ? 'oidc.refresh' : 'oidc.token', outcome: 'success', clientId, userId, details: { grant_type: grantType } });
    } else if (route === 'token' && ctx.status === 400) {
      await audit(ctx, { action: 'oidc.token', outcome: 'failure', clientId, userId, details: { error: (ctx.body as { error?: string } | undefined)?.error ?? null } });
    } else if (route === 'revocation' && ctx.status === 200) {
      await audit(ctx, { action: 'oidc.revoke', outcome: 'success', clientId });
    } else if ((route === 'authorization' || route === 'resume') && ctx.status === 303 && userId !== null && /[?&#]code=/.test(ctx.response.get('Location'))) {
      await signedIn(ctx, userId, clientId ?? '');
    }
  };

  /** A code issued to a client system for a user: the sign-in, audited and sent as user.login. */
  const signedIn = async (ctx: KoaContextWithOIDC, userId: number, clientId: string) => {
    const req = ctx.req as Request;
    const twoFactorUsed = req.session?.twoFactorUsed === true;
    const ipAddress = clientIp(req);
    const userAgent = ctx.get('user-agent') || '';
    try {
      await db.transaction(async (tx) => {
        const user = await findUserById(tx, userId);
        if (!user) return;
        await writeAudit(tx, { action: 'oidc.sign_in', outcome: 'success', userId, username: user.username, clientId, ipAddress, userAgent, details: { two_factor: twoFactorUsed } });
        await events.record(tx, 'user.login', { user_id: userId, email: user.email, ip_address: ipAddress, user_agent: userAgent, client_system: clientId, '2fa_used': twoFactorUsed });
      });
    } catch (err) {
      quietly(() => logger.error({ err }, 'OpenID Connect sign-in not recorded'));
    }
  };

  const build = async (): Promise<Provider> => {
    if (!views) throw new Error('the OpenID Connect pages are not attached (attachViews)');
    keys ??= loadOidcKeys(deps.config);
    const built = await createProvider({
      config: deps.config, db, keys, cookieKeys, findAccount,
      renderError: views.renderError, logoutSource: views.logoutSource, postLogoutSuccessSource: views.postLogoutSuccessSource,
      clientMetadata: async (id) => {
        const client = await clients.currentClient(id);
        rememberForRequest(servingRequest(), id, client);
        return client ? clientMetadata(client) : undefined;
      },
    });
    // the hashed secret: see secretCheck (src/oidc/clients.ts)
    built.Client.prototype.compareClientSecret = async function compare(this: { clientId: string }, actual: string) {
      const req = servingRequest();
      const fits = await checkSecret(this.clientId, actual, req);
      if (!fits) await countFailure(req, this.clientId);
      return fits;
    };
    built.use(afterAnswer);
    built.on('backchannel.error', (_ctx, err, clientId) => quietly(() => logger.warn({ err, client_id: clientId }, 'back-channel logout not delivered')));
    built.on('server_error', (_ctx, err) => quietly(() => logger.error({ err }, 'OpenID Connect provider error')));
    return built;
  };

  const ensureProvider = (): Promise<Provider> => {
    building ??= build().then((built) => (provider = built), (err: unknown) => {
      building = undefined; // the next request tries again
      throw err;
    });
    return building;
  };

  return {
    /** Loads the keys now (a start with unusable keys fails here, with the reason). */
    loadKeys: () => {
      keys ??= loadOidcKeys(deps.config);
      return keys;
    },
    /** The pages the provider renders (errors, the sign-out confirmation), given by src/pages/. */
    attachViews(given: Views, sessionKeys: string[]) {
      views = given;
      cookieKeys = sessionKeys;
    },
    /** The limit on failed client authentications the spec's endpoints use (src/http/rate-limit.ts), for the provider's token endpoints too. */
    useFailureLimit(limit: FailureLimit) {
      failures = limit;
    },
    /** The provider, built (and oidc-provider loaded) by the first caller. */
    provider: ensureProvider,
    /**
     * Serves a request for the provider (mounted at /oidc: the URL below the mount); the first
     * waits for it to be built. A failure to build rejects, for the app's error handler.
     */
    async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
      handler ??= (await ensureProvider()).callback();
      await handler(req, res);
    },
    /**
     * A user's sessions here ended (a sign-out, a password change or reset, a deactivation):
     * their OpenID Connect sessions end, and each client system that registered a
     * back-channel logout URI and had the user signed in is told (a logout token). With
     * `revoke`, their access and refresh tokens and grants go too.
     */
    async sessionsEnded(userId: number, options: { revoke?: boolean } = {}): Promise<void> {
      const sessions = options.revoke ? await revokeAccountArtefacts(db, String(userId)) : await revokeAccountArtefacts(db, String(userId), ['Session']);
      if (!provider || sessions.length === 0) return;
      for (const session of sessions) {
        const authorizations = (session.authorizations ?? {}) as Record<string, { sid?: string }>;
        for (const [clientId, { sid }] of Object.entries(authorizations)) {
          try {
            const client = await provider.Client.find(clientId);
            if (client?.backchannelLogoutUri) await (client as unknown as { backchannelLogout(sub: string, sid: string): Promise<void> }).backchannelLogout(String(userId), sid ?? '');
          } catch (err) {
            quietly(() => logger.warn({ err, client_id: clientId }, 'back-channel logout not delivered'));
          }
        }
      }
    },
    revokeAccountTokens: (userId: number) => revokeAccountTokens(db, String(userId)),
    /**
     * Whether the client's access rule admits this signed-in user now (docs/access.md); a refusal
     * is audited as a failed OpenID Connect sign-in (reason access_denied), with no user.login.
     */
    admits: (req: Request, user: Pick<UserRecord, 'id' | 'username'>, clientId: string): Promise<boolean> =>
      admitSignIn(db, user, clientId, { action: 'oidc.sign_in', ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null, details: {} }),
  };
}

export type OidcService = ReturnType<typeof createOidcService>;
