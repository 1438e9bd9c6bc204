import { uuidv7 } from 'uuidv7';
import { writeAudit } from '../audit/writer.ts';
import { callbackWithToken, isUsableCallbackUrl } from '../clients/callback.ts';
import { ClientChanged, type ClientRecord } from '../clients/client.ts';
import type { Deps } from '../context.ts';
import { AppError } from '../http/errors.ts';
import { createUserLookup } from '../users/queries.ts';
import type { UserRecord } from '../users/user.ts';
import { normalizeUsername } from '../validation/username.ts';
import { rolesOf } from '../users/roles.ts';
import { CLIENT_CHANGED } from './queries.ts';
import { createTokenStore } from './token-store.ts';
import { formatUtc, signSsoToken, SSO_AUDIENCE, type SsoClaims, UUID, verifyToken } from './tokens.ts';

/** The code of the refusal when a client's access rule does not admit the user (docs/access.md). */
export const ACCESS_DENIED = 'access_denied';

/** The 403 for a user the client's access rule does not admit. */
export function accessDenied(clientName: string): AppError {
  return new AppError(403, ACCESS_DENIED, `You do not have access to ${clientName}`);
}

/** The code of issueForUser's refusal when the browser session it issued in ended meanwhile. */
export const SESSION_ENDED = 'session_ended';

/**
 * A token's jti, the key of its sso_tokens row: a UUID of version 7 (RFC 9562), whose first 48
 * bits are the time of issue, then a counter that starts at a random value each millisecond (so
 * one process's ids sort in issue order), then random bits. Issued in time order, new rows go to
 * the right edge of the primary key's index, which stays in memory, where random (version 4)
 * keys land on any of its pages: at 10⁷ rows most of them are not in shared buffers, and the
 * first change to each after a checkpoint writes the whole page to the WAL (docs/performance.md,
 * "Cost as data grows"). A token's time of issue is in its claims already (iat). The `uuidv7`
 * package draws its random bits from a buffer it refills every eight words, where `uuid`'s v7
 * asked Web Crypto for 16 bytes per id: 4.5 µs of a token issue's 75 µs of CPU under load
 * (`npm run bench`, 2026-12-04 profile), against about half a microsecond.
 */
export const newTokenId = (): string => uuidv7();

/** Who asked, for the token's ip_address claim, the audit log and events. */
export interface RequestContext {
  ipAddress: string;
  userAgent: string | null;
}

/** The answer of a successful validation (docs/contract.md, "Answers"). */
export interface ValidationResult {
  valid: true;
  /** `roles` is the token's roles claim; `full_name` the user's, read by the statement that consumed the token. */
  user: { id: number; username: string; email: string; roles: string[]; full_name: string };
  expires_at: string;
}

const REASON_MESSAGES: Record<string, string> = {
  invalid_token: 'The token is invalid',
  token_expired: 'The token has expired',
  token_already_used: 'The token has already been used',
  token_revoked: 'The token has been revoked',
  ip_mismatch: 'The token is bound to another IP address',
  user_inactive: 'The user is inactive',
  access_denied: 'The user may no longer use this client system',
};

function rejected(reason: string): AppError {
  return new AppError(401, reason, REASON_MESSAGES[reason] ?? 'The token is invalid', { extra: { valid: false } });
}

/** Issuing and validating single-use SSO tokens. */
export function createSsoService(deps: Pick<Deps, 'db' | 'config' | 'signingKeys' | 'events' | 'metrics'>) {
  const { db, config, signingKeys, events, metrics } = deps;
  const tokens = createTokenStore(db, events);
  const users = createUserLookup(db);

  /** The claims of a token for `user` at `client` (docs/contract.md, "SSO token"), issued at `now` (seconds). */
  const claimsFor = (
    client: ClientRecord,
    user: { id: number; role: string; groups: readonly string[] },
    token: { username: string; ipAddress: string; now: number; jti: string },
  ): SsoClaims => ({
    user_id: String(user.id),
    username: token.username,
    client_id: client.client_id,
    client_name: client.client_name,
    roles: rolesOf(user, user.groups),
    ip_address: token.ipAddress,
    iat: token.now,
    exp: token.now + config.TOKEN_TTL_SECONDS,
    iss: config.ISSUER,
    aud: SSO_AUDIENCE,
    jti: token.jti,
  });

  /**
   * Signs a token for `user` at `client`, records it for the single-use check, writes the
   * audit row and the user.login event in one transaction. `claimUsername` is the name the
   * user has at the client (dashboard links); by default their own username.
   */
  async function issueForUser(
    client: ClientRecord,
    user: UserRecord,
    ctx: RequestContext & { tokenIp?: string; claimUsername?: string; twoFactorUsed?: boolean; flow: string; sessionId?: string },
  ): Promise<{ token: string; redirect_url: string; claims: SsoClaims }> {
    if (!isUsableCallbackUrl(client.callback_url)) {
      // no token is issued for a callback it could not be delivered to
      throw new AppError(409, 'client_misconfigured', 'The callback URL registered for this client system is not usable; an administrator must correct it');
    }
    // the roles are filled in once the record has read the user's groups (with the access check)
    const claims = claimsFor(client, { ...user, groups: [] }, { username: ctx.claimUsername ?? user.username, ipAddress: ctx.tokenIp ?? ctx.ipAddress, now: Math.floor(Date.now() / 1000), jti: newTokenId() });
    const recorded = await tokens.recordIssue({
      token: {
        jti: claims.jti,
        userId: user.id,
        clientId: client.client_id,
        username: claims.username,
        ipAddress: claims.ip_address,
        issuedAt: new Date(claims.iat * 1000),
        expiresAt: new Date(claims.exp * 1000),
        sessionId: ctx.sessionId ?? null,
      },
      audit: {
        action: 'token.issue',
        outcome: 'success',
        userId: user.id,
        username: user.username,
        clientId: client.client_id,
        ipAddress: ctx.ipAddress,
        userAgent: ctx.userAgent,
        // the account is the audit row's user; a linked name the token carries instead is kept beside it
        details: { jti: claims.jti, flow: ctx.flow, token_ip: claims.ip_address, ...(claims.username !== user.username ? { name_at_client: claims.username } : {}) },
      },
      event: {
        user_id: user.id,
        email: user.email,
        ip_address: claims.ip_address,
        user_agent: ctx.userAgent ?? '',
        client_system: client.client_id,
        '2fa_used': ctx.twoFactorUsed ?? false,
      },
    });
    // the browser signed out (another tab, a sign-out everywhere) while this was under way
    if (recorded === 'session_ended') throw new AppError(401, SESSION_ENDED, 'You were signed out meanwhile. Sign in again.');
    // deleted (psql, a seed file) while this was under way: no token for a client that is gone
    if (recorded === 'client_gone') throw new AppError(400, 'unknown_client', 'This client system is no longer registered');
    if (recorded === 'access_denied') {
      // a refused sign-in at that client: audited, no token and no user.login
      await writeAudit(db, {
        action: 'token.issue', outcome: 'failure', userId: user.id, username: user.username, clientId: client.client_id,
        ipAddress: ctx.ipAddress, userAgent: ctx.userAgent, details: { reason: ACCESS_DENIED, flow: ctx.flow },
      });
      metrics.tokensRejected.inc({ reason: ACCESS_DENIED });
      throw accessDenied(client.client_name);
    }
    claims.roles = rolesOf(user, recorded.groups);
    const token = signSsoToken(claims, signingKeys);
    metrics.tokensIssued.inc({ flow: ctx.flow });
    return { token, redirect_url: callbackWithToken(client.callback_url, token), claims };
  }

  return {
    issueForUser,

    /**
     * Server-to-server issue (POST /api/sso/token): unknown or inactive user is 404. The
     * user is found by the statement that records the token (one round trip); a client
     * whose callback is not usable takes the two-step way, so that its answer (404 for an
     * unknown user, else 409) stays what it always was. With `clientVersion`, as in validate.
     */
    async issueByUsername(client: ClientRecord, rawUsername: string, ctx: RequestContext & { tokenIp?: string; clientVersion?: string }) {
      if (isUsableCallbackUrl(client.callback_url)) {
        const now = Math.floor(Date.now() / 1000);
        const jti = newTokenId();
        const tokenIp = ctx.tokenIp ?? ctx.ipAddress;
        const outcome = await tokens.issueByUsername({
          jti,
          username: normalizeUsername(rawUsername),
          clientId: client.client_id,
          tokenIp,
          ipAddress: ctx.ipAddress,
          userAgent: ctx.userAgent,
          issuedAt: new Date(now * 1000),
          expiresAt: new Date((now + config.TOKEN_TTL_SECONDS) * 1000),
          clientVersion: ctx.clientVersion,
        });
        if (!outcome.issued && outcome.reason === CLIENT_CHANGED) throw new ClientChanged(client.client_id); // nothing written
        if (!outcome.issued && outcome.reason === ACCESS_DENIED) throw accessDenied(client.client_name); // audited by the statement
        if (!outcome.issued) throw new AppError(404, 'user_not_found', 'User not found or inactive'); // audited by the statement
        const claims = claimsFor(client, outcome.user, { username: outcome.user.username, ipAddress: tokenIp, now, jti });
        const token = signSsoToken(claims, signingKeys);
        metrics.tokensIssued.inc({ flow: 'server_to_server' });
        return { token, redirect_url: callbackWithToken(client.callback_url, token), claims };
      }
      const user = await users.byUsername(normalizeUsername(rawUsername));
      if (!user || !user.active) {
        await writeAudit(db, {
          action: 'token.issue',
          outcome: 'failure',
          userId: user?.id ?? null,
          username: normalizeUsername(rawUsername).slice(0, 200),
          clientId: client.client_id,
          ipAddress: ctx.ipAddress,
          userAgent: ctx.userAgent,
          details: { reason: user ? 'user_inactive' : 'user_not_found' },
        });
        throw new AppError(404, 'user_not_found', 'User not found or inactive');
      }
      return issueForUser(client, user, { ...ctx, flow: 'server_to_server' });
    },

    /**
     * Validates and consumes a token for the client it was issued to. Every outcome is
     * audited; failures are 401 {valid:false, error} with the reason. With `clientVersion`
     * (ClientRecord.version) nothing is consumed unless the client's row still has it:
     * ClientChanged otherwise.
     */
    async validate(client: ClientRecord, token: string, ctx: RequestContext & { expectedIp?: string; clientVersion?: string }): Promise<ValidationResult> {
      const fail = async (reason: string, extra: Record<string, unknown> = {}) => {
        await writeAudit(db, {
          action: 'token.validate',
          outcome: 'failure',
          clientId: client.client_id,
          ipAddress: ctx.ipAddress,
          userAgent: ctx.userAgent,
          userId: (extra.user_id as number | undefined) ?? null,
          details: { reason, ...extra },
        });
        metrics.tokensRejected.inc({ reason });
        return rejected(reason);
      };
      const verified = verifyToken<Partial<SsoClaims>>(token, signingKeys, { issuer: config.ISSUER, audience: SSO_AUDIENCE });
      if (!verified.ok) throw await fail(verified.reason);
      const claims = verified.claims;
      if (typeof claims.jti !== 'string' || !UUID.test(claims.jti) || claims.client_id !== client.client_id) {
        throw await fail('invalid_token', typeof claims.jti === 'string' && UUID.test(claims.jti) ? { jti: claims.jti, cause: 'other_client' } : {});
      }
      if (ctx.expectedIp !== undefined && ctx.expectedIp !== claims.ip_address) {
        throw await fail('ip_mismatch', { jti: claims.jti });
      }
      const consumed = await tokens.consume({ jti: claims.jti, clientId: client.client_id, ipAddress: ctx.ipAddress, userAgent: ctx.userAgent, clientVersion: ctx.clientVersion });
      if (consumed === CLIENT_CHANGED) throw new ClientChanged(client.client_id); // nothing consumed
      if (!consumed) {
        const state = await tokens.state(claims.jti);
        const reason = !state || state.client_id !== client.client_id
          ? 'invalid_token'
          : state.used_at ? 'token_already_used'
          // before token_revoked: deactivating a user also revokes their unused tokens
          : !state.user_active ? 'user_inactive'
          // the user left the groups (or role) the client admits since the token was issued
          : !state.admitted ? ACCESS_DENIED
          : state.invalidated_at || !state.name_valid ? 'token_revoked'
          : 'token_expired';
        throw await fail(reason, { jti: claims.jti, ...(state ? { user_id: state.user_id } : {}) });
      }
      metrics.tokensValidated.inc();
      return {
        valid: true,
        // both at hand: the claims verified above, the name from the consuming statement (no further query)
        user: { id: consumed.user_id, username: consumed.username, email: consumed.email, roles: Array.isArray(claims.roles) ? claims.roles : [], full_name: consumed.full_name },
        expires_at: formatUtc(new Date(consumed.expires_at)),
      };
    },
  };
}

export type SsoService = ReturnType<typeof createSsoService>;
