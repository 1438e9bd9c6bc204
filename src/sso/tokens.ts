import { createHmac, type KeyObject, timingSafeEqual } from 'node:crypto';
import jwt from 'jsonwebtoken';
import type { SigningKeys } from './keys.ts';

/** The audience of SSO tokens (docs/contract.md, "SSO token"). */
export const SSO_AUDIENCE = 'client_applications';

/** The form of a jti (any UUID: tokens issued before version 7 still validate). */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The claims of an SSO token: exactly those of docs/contract.md ("SSO token"), jti included. */
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

/** The encoded header of the tokens a key signs, as jsonwebtoken writes it ({alg, typ, kid}). */
const encodedHeaders = new WeakMap<SigningKeys, string>();

function encodedHeaderOf(keys: SigningKeys): string {
  let header = encodedHeaders.get(keys);
  if (header === undefined) {
    header = Buffer.from(JSON.stringify({ alg: 'HS256', typ: 'JWT', kid: keys.signing.kid })).toString('base64url');
    encodedHeaders.set(keys, header);
  }
  return header;
}

/**
 * Signs an SSO token: the very bytes `signToken` (jsonwebtoken) writes for the same claims
 * (test/sso/sign-token.test.ts compares them), without its per-call work. jsonwebtoken
 * checks its options and the claims' types on every call and builds the header anew;
 * here the claims are ours and always complete (iat included, which jsonwebtoken would
 * otherwise add), the header is encoded once per key, and the HMAC runs on the KeyObject.
 * Token issue signs once per request (docs/performance.md).
 */
export function signSsoToken(claims: SsoClaims, keys: SigningKeys): string {
  const signed = `${encodedHeaderOf(keys)}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
  return `${signed}.${createHmac('sha256', keys.signing.key).update(signed).digest('base64url')}`;
}

/**
 * The keys a token may be verified with, from its decoded header: the one its `kid` names,
 * none for a kid we do not know (a dropped key, a forgery), and every known key for a token
 * without a kid (issued before tokens carried one; its signature still decides). Only HS256
 * is accepted: `none`, HS512 and every other alg get no key.
 */
function keysForHeader(header: unknown, keys: SigningKeys): readonly KeyObject[] {
  if (typeof header !== 'object' || header === null || Array.isArray(header)) return [];
  const { alg, kid } = header as { alg?: unknown; kid?: unknown };
  if (alg !== 'HS256') return [];
  if (kid === undefined) return keys.all;
  const key = typeof kid === 'string' ? keys.byKid.get(kid) : undefined;
  return key ? [key] : [];
}

/**
 * The encoded headers this service signs with (one per key, as `signToken` writes them),
 * recognized without decoding them; any other header is decoded and checked in full.
 */
const knownHeaders = new WeakMap<SigningKeys, Map<string, readonly KeyObject[]>>();

function candidateKeys(encodedHeader: string, keys: SigningKeys): readonly KeyObject[] {
  let known = knownHeaders.get(keys);
  if (!known) {
    known = new Map();
    for (const [kid, key] of keys.byKid) {
      known.set(Buffer.from(JSON.stringify({ alg: 'HS256', typ: 'JWT', kid })).toString('base64url'), [key]);
    }
    knownHeaders.set(keys, known);
  }
  const hit = known.get(encodedHeader);
  if (hit) return hit;
  try {
    return keysForHeader(JSON.parse(Buffer.from(encodedHeader, 'base64url').toString('utf8')), keys);
  } catch {
    return [];
  }
}

/** Every token we sign carries these; one without them is refused whatever its signature. */
function hasRequiredClaims(claims: Record<string, unknown>): boolean {
  return Number.isFinite(claims.exp) && Number.isFinite(claims.iat)
    && typeof claims.iss === 'string' && claims.aud !== undefined
    && typeof claims.jti === 'string' && claims.jti !== '';
}

/** Compact JWS: three base64url parts, the signature not empty. */
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/** Whether `signature` is the HS256 signature of `signed` under `key`, compared in constant time. */
function signatureMatches(signed: string, signature: string, key: KeyObject): boolean {
  const expected = Buffer.from(createHmac('sha256', key).update(signed).digest('base64url'));
  const given = Buffer.from(signature);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * Checks, in this order (the order jsonwebtoken's verify checked them in, so every refusal
 * keeps its reason): the form (three base64url parts, a signature), the alg (HS256 only:
 * `none`, HS512 and every other alg are refused), the key the `kid` header names, the
 * signature (HMAC-SHA256 on the KeyObject, compared in constant time), not-before, expiry
 * (unless `ignoreExpiration`; expired is `token_expired`, everything else `invalid_token`),
 * audience, issuer, and that exp, iat, iss, aud and jti are all present. Returns the claims
 * or the reason for refusal.
 */
export function verifyToken<T>(
  token: string,
  keys: SigningKeys,
  expect: { issuer: string; audience: string; ignoreExpiration?: boolean },
): { ok: true; claims: T } | { ok: false; reason: TokenRejection } {
  const invalid = { ok: false, reason: 'invalid_token' } as const;
  if (typeof token !== 'string' || !COMPACT_JWS.test(token)) return invalid;
  const firstDot = token.indexOf('.');
  const lastDot = token.lastIndexOf('.');
  const candidates = candidateKeys(token.slice(0, firstDot), keys);
  const signed = token.slice(0, lastDot);
  const signature = token.slice(lastDot + 1);
  let verified = false;
  for (let i = 0; i < candidates.length && !verified; i++) verified = signatureMatches(signed, signature, candidates[i]);
  if (!verified) return invalid;

  let claims: unknown;
  try {
    claims = JSON.parse(Buffer.from(token.slice(firstDot + 1, lastDot), 'base64url').toString('utf8'));
  } catch {
    return invalid;
  }
  if (typeof claims !== 'object' || claims === null || Array.isArray(claims)) return invalid;
  const c = claims as Record<string, unknown>;
  const now = Math.floor(Date.now() / 1000);
  if (c.nbf !== undefined && (typeof c.nbf !== 'number' || c.nbf > now)) return invalid;
  if (c.exp !== undefined && !expect.ignoreExpiration) {
    if (typeof c.exp !== 'number') return invalid;
    if (now >= c.exp) return { ok: false, reason: 'token_expired' };
  }
  const audiences = Array.isArray(c.aud) ? c.aud : [c.aud];
  if (!audiences.includes(expect.audience)) return invalid;
  if (c.iss !== expect.issuer) return invalid;
  if (!hasRequiredClaims(c)) return invalid;
  return { ok: true, claims: claims as T };
}

/** Formats a Date as `YYYY-MM-DD HH:MM:SS` in UTC (the `expires_at` of a validation). */
export function formatUtc(date: Date): string {
  return date.toISOString().slice(0, 19).replace('T', ' ');
}
