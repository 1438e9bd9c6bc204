import type { Request } from 'express';
import type Provider from 'oidc-provider';
import type { Configuration, KoaContextWithOIDC } from 'oidc-provider';
import type { Config } from '../config.ts';
import type { Db } from '../db/db.ts';
import type { UserRecord } from '../users/user.ts';
import { ClientAdapter, createArtefactBatches, DbAdapter } from './adapter.ts';
import type { SigningJwk } from './keys.ts';
import { oidcLibrary, oidcLibraryIfLoaded } from './library.ts';

/** The request oidc-provider is serving now (its AsyncLocalStorage context), if any. */
export function servingRequest(): Request | undefined {
  const provider = oidcLibraryIfLoaded()?.default as unknown as { ctx?: KoaContextWithOIDC } | undefined;
  return provider?.ctx?.req as Request | undefined;
}

/** Where oidc-provider is mounted in the app; the discovery document is also served at the root (issuer = PUBLIC_URL). */
export const OIDC_PREFIX = '/oidc';

/**
 * The provider's machine-to-machine endpoints (oidc-provider's default routes, below the
 * mount): token, introspection, revocation, JWKS and userinfo. They carry a client's
 * credentials or a bearer token, never the browser's session, so the app serves them before
 * sessions are loaded (src/app.ts): no session object, no look-up of the bearer token as one
 * of the service's own.
 */
export const OIDC_SESSIONLESS_PATHS: ReadonlySet<string> = new Set(['/token', '/token/introspection', '/token/revocation', '/jwks', '/me']);

/** Of those, the POST endpoints client backends call at volume: served by the fast path (src/app.ts). */
export const OIDC_HOT_PATHS: ReadonlySet<string> = new Set(['/token', '/token/introspection', '/token/revocation']);

/** oidc-provider's routes as this configuration serves them (its defaults; below the mount), for the request metric. */
const PROVIDER_ROUTES: ReadonlySet<string> = new Set([
  ...OIDC_SESSIONLESS_PATHS, '/.well-known/openid-configuration', '/auth', '/session/end', '/session/end/confirm', '/session/end/success',
]);

/**
 * The route pattern of a request for the provider (`path` below the mount) as the request
 * metric labels it (`/oidc/token`, `/oidc/auth/:uid`), or undefined for a path it does not
 * serve (the metric's `unmatched`): never the raw path, which a caller chooses.
 */
export function providerRoute(path: string): string | undefined {
  if (PROVIDER_ROUTES.has(path)) return `${OIDC_PREFIX}${path}`;
  if (/^\/auth\/[\w-]+$/.test(path)) return `${OIDC_PREFIX}/auth/:uid`; // an authorization resumed after its interaction
  return undefined;
}

/** The sign-in page of an interaction (src/pages/oidc-interaction.ts serves it). */
export const interactionPath = (uid: string) => `${OIDC_PREFIX}/interaction/${uid}`;

/** The issuer: PUBLIC_URL without a trailing slash; outside production without one, http://localhost:PORT. */
export function issuerOf(config: Pick<Config, 'PUBLIC_URL' | 'PORT'>): string {
  return (config.PUBLIC_URL ?? `http://localhost:${config.PORT}`).replace(/\/+$/, '');
}

/** Lifetimes (seconds). Codes are short; refresh tokens rotate and live two weeks unused. */
const TTL = { AuthorizationCode: 60, AccessToken: 3600, IdToken: 3600, RefreshToken: 14 * 86_400, Grant: 14 * 86_400, Interaction: 3600 };

export interface ProviderParts {
  config: Config;
  db: Db;
  keys: SigningJwk[];
  /** The cookie keys (the session keys: SESSION_SECRET first, then the previous ones). */
  cookieKeys: string[];
  clientMetadata(clientId: string): Promise<Record<string, unknown> | undefined>;
  /**
   * An active user by id whom the client's access rule admits now (docs/access.md), with their
   * `roles` (role and groups, rolesOf); undefined for an unknown or inactive user, or one the
   * rule no longer admits: the provider then issues nothing (a code or refresh token is
   * invalid_grant, an access token at userinfo invalid_token).
   */
  findAccount(id: number, clientId: string | undefined): Promise<{ user: UserRecord; roles: string[] } | undefined>;
  renderError: NonNullable<Configuration['renderError']>;
  logoutSource: NonNullable<NonNullable<NonNullable<Configuration['features']>['rpInitiatedLogout']>['logoutSource']>;
  postLogoutSuccessSource: NonNullable<NonNullable<NonNullable<Configuration['features']>['rpInitiatedLogout']>['postLogoutSuccessSource']>;
}

/**
 * The login prompt also asks for a sign-in when this browser's session at the service is not
 * the provider session's user (signed out here, or signed in as someone else since): the
 * service's session decides, so a sign-out here ends the OpenID Connect sign-in too.
 */
function loginPolicy({ Check, base }: Awaited<ReturnType<typeof oidcLibrary>>['interactionPolicy']) {
  const policy = base();
  policy.get('login')!.checks.add(new Check('service_session', 'the browser is not signed in to the service as this user', (ctx: KoaContextWithOIDC) => {
    const userId = (ctx.req as Request).session?.userId;
    return typeof userId !== 'number' || String(userId) !== ctx.oidc.session?.accountId;
  }));
  return policy;
}

/** The provider, configured for this service (docs/openid-connect.md); the library is loaded first (src/oidc/library.ts). */
export async function createProvider(parts: ProviderParts): Promise<Provider> {
  const { default: Provider, interactionPolicy } = await oidcLibrary();
  const { config } = parts;
  const production = config.NODE_ENV === 'production';
  const algs = [...new Set(parts.keys.map((k) => k.alg))] as Array<'RS256' | 'ES256' | 'ES384' | 'EdDSA'>;
  const clients = new ClientAdapter(async (id) => parts.clientMetadata(id));
  const batches = createArtefactBatches(parts.db, servingRequest);
  const configuration: Configuration = {
    adapter: (name: string) => (name === 'Client' ? clients : new DbAdapter(parts.db, name, batches)),
    jwks: { keys: parts.keys },
    cookies: {
      keys: parts.cookieKeys,
      long: { secure: production, sameSite: 'lax', httpOnly: true },
      short: { secure: production, sameSite: 'lax', httpOnly: true },
    },
    async findAccount(ctx, id) {
      const found = /^\d{1,15}$/.test(id) ? await parts.findAccount(Number(id), ctx.oidc?.client?.clientId) : undefined;
      if (!found) return undefined;
      const { user, roles } = found;
      return {
        accountId: id,
        async claims() {
          return { sub: id, name: user.full_name, preferred_username: user.username, email: user.email, roles };
        },
      };
    },
    claims: { openid: ['sub', 'roles'], profile: ['name', 'preferred_username'], email: ['email'] },
    scopes: ['openid', 'offline_access', 'profile', 'email'],
    // the claims of the granted scopes go in the ID token too, not only in userinfo
    conformIdTokenClaims: false,
    responseTypes: ['code'],
    clientAuthMethods: ['client_secret_basic', 'client_secret_post', 'none'],
    // asymmetric algorithms only: no key is ever derived from a client secret (src/oidc/clients.ts)
    enabledJWA: {
      idTokenSigningAlgValues: algs,
      userinfoSigningAlgValues: algs,
      introspectionSigningAlgValues: algs,
      authorizationSigningAlgValues: algs,
      requestObjectSigningAlgValues: algs,
      clientAuthSigningAlgValues: ['RS256', 'ES256'],
    },
    // PKCE (S256, the only method) is required of public clients and checked whenever sent
    pkce: { required: (_ctx, client) => client.clientAuthMethod === 'none' },
    features: {
      devInteractions: { enabled: false },
      introspection: { enabled: true },
      revocation: { enabled: true },
      backchannelLogout: { enabled: true },
      rpInitiatedLogout: { enabled: true, logoutSource: parts.logoutSource, postLogoutSuccessSource: parts.postLogoutSuccessSource },
    },
    interactions: { url: (_ctx, interaction) => interactionPath(interaction.uid), policy: loginPolicy(interactionPolicy) },
    // No consent screen for the client systems the administrators registered: the grant
    // covers what the client asked for (offline_access only with prompt=consent, per the spec).
    async loadExistingGrant(ctx) {
      const { client, session, params } = ctx.oidc;
      if (!client || !session?.accountId) return undefined;
      const grantId = ctx.oidc.result?.consent?.grantId ?? session.grantIdFor(client.clientId);
      const found = grantId ? await ctx.oidc.provider.Grant.find(grantId) : undefined;
      const grant = found && found.accountId === session.accountId ? found : new ctx.oidc.provider.Grant({ clientId: client.clientId, accountId: session.accountId });
      grant.addOIDCScope(String(params?.scope ?? 'openid'));
      await grant.save();
      return grant;
    },
    rotateRefreshToken: true,
    ttl: { ...TTL, Session: config.SESSION_TTL_SECONDS },
    clientBasedCORS(ctx, origin, client) {
      // browsers call the token endpoint only for public clients, from their redirect URIs' origins
      if (origin === 'null') return false;
      if (ctx.oidc.route !== 'userinfo' && client.clientAuthMethod !== 'none') return false;
      return (client.redirectUris ?? []).some((uri) => URL.parse(uri)?.origin === origin);
    },
    renderError: parts.renderError,
    // Back-channel logout tokens go to the client systems' URIs: oidc-provider refuses private
    // and loopback addresses, as the webhooks do in production; outside production, or with
    // WEBHOOK_ALLOW_PRIVATE, they are allowed as they are for webhooks.
    fetch: (url, options) => globalThis.fetch(url, !production || config.WEBHOOK_ALLOW_PRIVATE ? { ...options, dispatcher: undefined } as RequestInit : options),
  };
  const provider = new Provider(issuerOf(config), configuration);
  provider.proxy = Boolean(config.TRUST_PROXY) && config.TRUST_PROXY !== 'false';
  return provider;
}
