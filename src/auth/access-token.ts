import { randomUUID } from 'node:crypto';
import type { SigningKeys } from '../sso/keys.ts';
import { signToken, verifyToken } from '../sso/tokens.ts';

/**
 * The audience of access tokens for this service's own API (POST /api/login). SSO tokens
 * carry `client_applications`; each verifier demands its own audience, so neither kind is
 * ever accepted in place of the other although both are signed with the same key.
 */
export const ACCESS_AUDIENCE = 'auth_api';

/** Claims of an access token: the user as `sub` (a string, as JWT wants). */
export interface AccessClaims {
  sub: string;
  iss: string;
  aud: string;
  iat: number;
  exp: number;
  jti: string;
}

/** Signs an access token for `userId`, valid `ttlSeconds`. */
export function signAccessToken(userId: number, keys: SigningKeys, options: { issuer: string; ttlSeconds: number }): string {
  const now = Math.floor(Date.now() / 1000);
  const claims: AccessClaims = {
    sub: String(userId),
    iss: options.issuer,
    aud: ACCESS_AUDIENCE,
    iat: now,
    exp: now + options.ttlSeconds,
    jti: randomUUID(),
  };
  return signToken(claims, keys);
}

/**
 * The user id an access token names, or null for anything that is not a valid, unexpired
 * access token with every required claim (exp, iat, iss, aud, jti), signed by a known key.
 */
export function verifyAccessToken(token: string, keys: SigningKeys, issuer: string): number | null {
  const verified = verifyToken<Partial<AccessClaims>>(token, keys, { issuer, audience: ACCESS_AUDIENCE });
  if (!verified.ok) return null;
  const sub = verified.claims.sub;
  if (typeof sub !== 'string' || !/^[1-9]\d{0,9}$/.test(sub)) return null;
  return Number(sub);
}
