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
  /** `iat` to the millisecond, so a password change refuses tokens issued within its own second. */
  iat_ms: number;
  /** The version of the user's credentials the sign-in saw (CREDENTIALS_VERSION); a later one refuses the token. */
  cver?: string;
}

/** Signs an access token for `userId`, valid `ttlSeconds`. */
export function signAccessToken(userId: number, keys: SigningKeys, options: { issuer: string; ttlSeconds: number; credentialsVersion: string }): string {
  const nowMs = Date.now();
  const now = Math.floor(nowMs / 1000);
  const claims: AccessClaims = {
    sub: String(userId),
    iss: options.issuer,
    aud: ACCESS_AUDIENCE,
    iat: now,
    exp: now + options.ttlSeconds,
    jti: randomUUID(),
    iat_ms: nowMs,
    cver: options.credentialsVersion,
  };
  return signToken(claims, keys);
}

/**
 * The user id an access token names, or null for anything that is not a valid, unexpired
 * access token with every required claim (exp, iat, iss, aud, jti), signed by a known key.
 */
export function verifyAccessToken(token: string, keys: SigningKeys, issuer: string): number | null {
  return verifyAccessTokenClaims(token, keys, issuer)?.userId ?? null;
}

/** What the service needs of a valid access token: whose it is, when it was issued (ms), its id and its end. */
export interface AccessTokenClaims {
  userId: number;
  issuedAtMs: number;
  jti: string;
  expiresAt: Date;
  /** The version of the credentials it was signed for; undefined in tokens from before it was carried. */
  credentialsVersion?: string;
}

/** The claims of a valid, unexpired access token, or null. */
export function verifyAccessTokenClaims(token: string, keys: SigningKeys, issuer: string): AccessTokenClaims | null {
  const verified = verifyToken<Partial<AccessClaims>>(token, keys, { issuer, audience: ACCESS_AUDIENCE });
  if (!verified.ok) return null;
  const { sub, iat, iat_ms: iatMs, jti, exp, cver } = verified.claims;
  if (typeof sub !== 'string' || !/^[1-9]\d{0,9}$/.test(sub)) return null;
  if (typeof jti !== 'string' || jti.length === 0 || jti.length > 100 || typeof exp !== 'number') return null;
  const issuedAtMs = typeof iatMs === 'number' && Number.isFinite(iatMs) ? iatMs : typeof iat === 'number' ? iat * 1000 : 0;
  if (cver !== undefined && (typeof cver !== 'string' || !/^\d{1,20}$/.test(cver))) return null;
  return { userId: Number(sub), issuedAtMs, jti, expiresAt: new Date(exp * 1000), credentialsVersion: cver };
}
