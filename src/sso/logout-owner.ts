import type { ClientRecord } from '../clients/client.ts';
import type { Deps } from '../context.ts';
import type { Queryable } from '../db/db.ts';
import { findUserById } from '../users/queries.ts';
import { tokenOwner } from './consume-queries.ts';
import { SSO_AUDIENCE, type SsoClaims, UUID, verifyToken } from './tokens.ts';

/**
 * The user an SSO token names, and the browser session it was issued in, for a client
 * system's logout call: the signature, issuer and audience must hold and the token must have
 * been issued by us to this very client; expiry is not checked (a client logs a user out
 * long after the token was consumed), nor whether its row is still kept.
 */
export async function tokenOwnerForLogout(
  q: Queryable,
  deps: Pick<Deps, 'config' | 'signingKeys'>,
  client: Pick<ClientRecord, 'client_id' | 'created_at'>,
  token: string,
): Promise<{ userId: number; sessionId: string | null } | null> {
  const verified = verifyToken<Partial<SsoClaims>>(token, deps.signingKeys, { issuer: deps.config.ISSUER, audience: SSO_AUDIENCE, ignoreExpiration: true });
  if (!verified.ok) return null;
  const claims = verified.claims;
  if (typeof claims.jti !== 'string' || !UUID.test(claims.jti) || claims.client_id !== client.client_id) return null;
  const owner = await tokenOwner(q, claims.jti, client.client_id);
  if (owner) return owner;
  return prunedTokenOwner(q, deps.config, client, claims);
}

/** Leeway between this host's clock and the database's, by which the pruner judges a token's age. */
const PRUNE_CLOCK_MARGIN_MS = 5 * 60_000;

/**
 * The user of a token whose row is gone because the pruner took it: TOKEN_RETENTION after it was
 * used or expired (a browser's with its session). The signature still proves we issued it for
 * this user to a client with this id, and a client keeps a user's token as long as they stay
 * signed in there: the user it names, no session left to end. Only a token old enough to have
 * been pruned, issued to this client since it was created (a client deleted takes its tokens'
 * rows with it, and one created again under the same id was never given them), for a user who
 * still exists. Null otherwise.
 */
async function prunedTokenOwner(
  q: Queryable, config: Pick<Deps['config'], 'TOKEN_RETENTION'>, client: Pick<ClientRecord, 'created_at'>, claims: Partial<SsoClaims>,
): Promise<{ userId: number; sessionId: null } | null> {
  if (config.TOKEN_RETENTION === 0 || typeof claims.exp !== 'number' || typeof claims.iat !== 'number') return null;
  if (claims.exp * 1000 + config.TOKEN_RETENTION > Date.now() + PRUNE_CLOCK_MARGIN_MS) return null; // not pruned yet: never recorded
  if ((claims.iat + 1) * 1000 <= new Date(client.created_at).getTime()) return null; // iat is whole seconds
  const userId = typeof claims.user_id === 'string' && /^[1-9]\d{0,15}$/.test(claims.user_id) ? Number(claims.user_id) : null;
  return userId !== null && (await findUserById(q, userId)) ? { userId, sessionId: null } : null;
}
