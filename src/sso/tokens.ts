import type { KeyObject } from 'node:crypto';
import jwt from 'jsonwebtoken';
import type { SigningKeys } from './keys.ts';

/** The audience of SSO tokens (SPEC 2.3). */
export const SSO_AUDIENCE = 'client_applications';

/** The claims of an SSO token: exactly SPEC 2.3 plus jti. */
export interface SsoClaims {
  user_id: string;
  username: string;
  client_id: string;
  client_name: string;
  roles: string[];
  ip_address: string;
  iat: number;
  exp: number;
  iss: string;
  aud: string;
  jti: string;
}

/** Why a presented token was refused before the database was asked. */
export type TokenRejection = 'invalid_token' | 'token_expired';

/** Signs claims with HS256 and the signing key, naming it in the `kid` header. */
export function signToken(claims: object, keys: SigningKeys): string {
  return jwt.sign(claims, keys.signing.key, { algorithm: 'HS256', keyid: keys.signing.kid });
}

/**
 * The keys a token may be verified with: the one its `kid` names, none for a kid we do not
 * know (a dropped key, a forgery) or a header that is not JSON, and every known key for a
 * token without a kid (issued before tokens carried one; its signature still decides).
 */
function candidateKeys(token: string, keys: SigningKeys): readonly KeyObject[] {
  const dot = token.indexOf('.');
  if (dot <= 0) return [];
  let header: unknown;
  try {
    header = JSON.parse(Buffer.from(token.slice(0, dot), 'base64url').toString('utf8'));
  } catch {
    return [];
  }
  if (typeof header !== 'object' || header === null) return [];
  const kid = (header as { kid?: unknown }).kid;
  if (kid === undefined) return keys.all;
  const key = typeof kid === 'string' ? keys.byKid.get(kid) : undefined;
  return key ? [key] : [];
}

/** Every token we sign carries these; one without them is refused whatever its signature. */
function hasRequiredClaims(claims: Record<string, unknown>): boolean {
  return Number.isFinite(claims.exp) && Number.isFinite(claims.iat)
    && typeof claims.iss === 'string' && claims.aud !== undefined
    && typeof claims.jti === 'string' && claims.jti !== '';
}

/**
 * Checks signature (HS256 only: `none`, HS512 and every other alg are refused) with the key
 * the `kid` header names, expiry (unless `ignoreExpiration`), issuer and audience, and that
 * exp, iat, iss, aud and jti are all present. Returns the claims or the reason for refusal.
 */
export function verifyToken<T>(
  token: string,
  keys: SigningKeys,
  expect: { issuer: string; audience: string; ignoreExpiration?: boolean },
): { ok: true; claims: T } | { ok: false; reason: TokenRejection } {
  const candidates = candidateKeys(token, keys);
  const options = { algorithms: ['HS256' as const], issuer: expect.issuer, audience: expect.audience, ignoreExpiration: expect.ignoreExpiration };
  for (let i = 0; i < candidates.length; i++) {
    try {
      const claims = jwt.verify(token, candidates[i], options);
      if (typeof claims !== 'object' || claims === null || !hasRequiredClaims(claims)) return { ok: false, reason: 'invalid_token' };
      return { ok: true, claims: claims as T };
    } catch (err) {
      // a kid-less token: a wrong signature may just mean another of our keys signed it
      if ((err as Error).message === 'invalid signature' && i < candidates.length - 1) continue;
      return { ok: false, reason: (err as Error).name === 'TokenExpiredError' ? 'token_expired' : 'invalid_token' };
    }
  }
  return { ok: false, reason: 'invalid_token' };
}

/** Formats a Date as `YYYY-MM-DD HH:MM:SS` in UTC (SPEC 4.2 expires_at). */
export function formatUtc(date: Date): string {
  return date.toISOString().slice(0, 19).replace('T', ' ');
}
