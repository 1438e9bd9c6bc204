import { createHash, createPrivateKey, generateKeyPairSync, type JsonWebKey, type KeyObject } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Config } from '../config.ts';
import { createWhole } from '../config/create-whole.ts';

/** A private signing key as oidc-provider takes it (`jwks.keys`): a JWK with `kid`, `alg` and `use`. */
export type SigningJwk = JsonWebKey & { kid: string; alg: string; use: 'sig' };

/** Thrown when the configured OpenID Connect keys cannot be used; the message says why. */
export class OidcKeyError extends Error {}

/**
 * The RFC 7638 thumbprint of a public key: the `kid` of a key configured without one, so
 * every instance given the same key names it the same way. Hand-written: node:crypto has
 * no thumbprint, and jose is only a development dependency here.
 */
function thumbprint(jwk: JsonWebKey): string {
  const members = jwk.kty === 'RSA' ? { e: jwk.e, kty: jwk.kty, n: jwk.n }
    : jwk.kty === 'EC' ? { crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y }
      : { crv: jwk.crv, kty: jwk.kty, x: jwk.x };
  return createHash('sha256').update(JSON.stringify(members)).digest('base64url');
}

/** The JWS algorithm a key signs with: RS256 for RSA (OpenID Connect's mandatory one), ES256/ES384 for EC, EdDSA for Ed25519. */
function algorithmOf(jwk: JsonWebKey): string {
  if (jwk.kty === 'RSA') return 'RS256';
  if (jwk.kty === 'EC' && jwk.crv === 'P-256') return 'ES256';
  if (jwk.kty === 'EC' && jwk.crv === 'P-384') return 'ES384';
  if (jwk.kty === 'OKP' && jwk.crv === 'Ed25519') return 'EdDSA';
  throw new OidcKeyError(`a ${jwk.kty} ${jwk.crv ?? ''} key cannot sign ID tokens here (RSA, EC P-256/P-384 or Ed25519)`);
}

/** One configured key as a signing JWK: private, asymmetric, with a kid (its thumbprint when it has none). */
function signingJwk(key: KeyObject | JsonWebKey, given?: { kid?: string; alg?: string }): SigningJwk {
  let jwk: JsonWebKey;
  try {
    jwk = key instanceof Object && 'export' in key && typeof key.export === 'function'
      ? (key as KeyObject).export({ format: 'jwk' })
      : createPrivateKey({ key: key as JsonWebKey, format: 'jwk' }).export({ format: 'jwk' });
  } catch {
    throw new OidcKeyError('a key is not a private key (a JWK with "d", or a PEM private key)');
  }
  if (!jwk.d) throw new OidcKeyError('a key is public only: signing needs the private key');
  const alg = given?.alg ?? algorithmOf(jwk);
  if (alg.startsWith('HS')) throw new OidcKeyError('a symmetric key cannot sign ID tokens others verify');
  return { ...jwk, kid: given?.kid || thumbprint(jwk), alg, use: 'sig' };
}

/**
 * The keys in `text`: a JWK set (`{"keys":[...]}`), one JWK, an array of JWKs, or one or more
 * PEM private keys one after the other. In the order given: the first key of an algorithm
 * signs with it, every key is published in the JWKS (a rotation keeps the previous key listed).
 */
export function parseSigningKeys(text: string): SigningJwk[] {
  const trimmed = text.trim();
  let keys: SigningJwk[];
  if (trimmed.startsWith('-----BEGIN')) {
    const pems = trimmed.match(/-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]+?-----END [A-Z ]*PRIVATE KEY-----/g) ?? [];
    if (pems.length === 0) throw new OidcKeyError('no PEM private key found');
    keys = pems.map((pem) => {
      try {
        return signingJwk(createPrivateKey(pem));
      } catch (err) {
        if (err instanceof OidcKeyError) throw err;
        throw new OidcKeyError('a PEM block is not a private key');
      }
    });
  } else {
    let parsed: unknown;
    try {
      parsed = JSON.parse(trimmed);
    } catch {
      throw new OidcKeyError('neither JSON (a JWK set) nor PEM');
    }
    const list = Array.isArray(parsed) ? parsed : (parsed as { keys?: unknown }).keys ?? [parsed];
    if (!Array.isArray(list) || list.length === 0) throw new OidcKeyError('the JWK set has no keys');
    keys = list.map((k) => signingJwk(k as JsonWebKey, k as { kid?: string; alg?: string }));
  }
  const kids = new Set<string>();
  for (const k of keys) {
    if (kids.has(k.kid)) throw new OidcKeyError(`two keys have the kid ${k.kid}`);
    kids.add(k.kid);
  }
  if (!keys.some((k) => k.alg === 'RS256')) throw new OidcKeyError('an RSA key (RS256, the algorithm every OpenID Connect client supports) is required');
  return keys;
}

/** A new development key set: one RSA key (RS256) and one P-256 key (ES256). */
function generateKeys(): SigningJwk[] {
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  return [signingJwk(rsa), signingJwk(ec)];
}

/**
 * The OpenID Connect signing keys: OIDC_SIGNING_KEYS, else the file OIDC_SIGNING_KEYS_FILE
 * (required in production, where config.ts refuses to start without one of them); otherwise
 * a key set generated once and kept in DATA_DIR/oidc-keys.json, as the development JWT key
 * is (the first instance to write it wins, the others read it).
 */
export function loadOidcKeys(config: Pick<Config, 'DATA_DIR'> & Partial<Pick<Config, 'OIDC_SIGNING_KEYS' | 'OIDC_SIGNING_KEYS_FILE'>>): SigningJwk[] {
  const describe = (where: string, err: unknown): never => {
    throw new OidcKeyError(`Invalid configuration: ${where}: ${err instanceof Error ? err.message : String(err)}`);
  };
  if (config.OIDC_SIGNING_KEYS) {
    try {
      return parseSigningKeys(config.OIDC_SIGNING_KEYS);
    } catch (err) {
      return describe('OIDC_SIGNING_KEYS', err);
    }
  }
  if (config.OIDC_SIGNING_KEYS_FILE) {
    let text: string;
    try {
      text = readFileSync(config.OIDC_SIGNING_KEYS_FILE, 'utf8');
    } catch {
      return describe('OIDC_SIGNING_KEYS_FILE', new Error(`cannot read ${config.OIDC_SIGNING_KEYS_FILE}`));
    }
    try {
      return parseSigningKeys(text);
    } catch (err) {
      return describe('OIDC_SIGNING_KEYS_FILE', err);
    }
  }
  const file = path.resolve(config.DATA_DIR, 'oidc-keys.json');
  const read = (): SigningJwk[] | null => {
    try {
      return parseSigningKeys(readFileSync(file, 'utf8'));
    } catch {
      return null;
    }
  };
  const existing = read();
  if (existing) return existing;
  mkdirSync(path.dirname(file), { recursive: true });
  const keys = generateKeys();
  if (createWhole(file, JSON.stringify({ keys }), 0o600)) return keys;
  const theirs = read();
  if (theirs) return theirs;
  throw new OidcKeyError(`${file} holds no usable key set: remove it and start again`);
}

/** The public half of the keys, as the JWKS publishes them (for tests and the docs). */
export function publicJwks(keys: readonly SigningJwk[]): { keys: JsonWebKey[] } {
  return { keys: keys.map(({ d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...pub }) => pub) };
}
