import type { KeyObject } from 'node:crypto';
import jwt from 'jsonwebtoken';

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

/** Signs claims with HS256. */
export function signToken(claims: object, key: KeyObject): string {
  return jwt.sign(claims, key, { algorithm: 'HS256' });
}

/**
 * Checks signature (HS256 only: `none`, HS512 and every other alg are refused), expiry,
 * issuer and audience. Returns the claims or the reason for refusal.
 */
export function verifyToken<T>(
  token: string,
  key: KeyObject,
  expect: { issuer: string; audience: string },
): { ok: true; claims: T } | { ok: false; reason: TokenRejection } {
  try {
    const claims = jwt.verify(token, key, { algorithms: ['HS256'], issuer: expect.issuer, audience: expect.audience });
    if (typeof claims !== 'object' || claims === null) return { ok: false, reason: 'invalid_token' };
    return { ok: true, claims: claims as T };
  } catch (err) {
    return { ok: false, reason: (err as Error).name === 'TokenExpiredError' ? 'token_expired' : 'invalid_token' };
  }
}

/** Formats a Date as `YYYY-MM-DD HH:MM:SS` in UTC (SPEC 4.2 expires_at). */
export function formatUtc(date: Date): string {
  return date.toISOString().slice(0, 19).replace('T', ' ');
}
