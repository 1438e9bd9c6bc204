import { createHash, createSecretKey, type KeyObject } from 'node:crypto';
import path from 'node:path';
import type { Config } from '../config.ts';
import { developmentKey } from '../config/key-file.ts';

/** One HMAC key and the `kid` that names it in token headers. */
export interface NamedKey {
  kid: string;
  key: KeyObject;
}

/**
 * The keys of every token this service signs: `signing` signs (JWT_SECRET), and `byKid`
 * holds it and every previous key (JWT_PREVIOUS_SECRETS), which only verify. Each key is a
 * KeyObject built once (jsonwebtoken with a string key re-derives it on every call and is
 * about 50x slower), found by its kid with one Map lookup.
 */
export interface SigningKeys {
  signing: NamedKey;
  byKid: ReadonlyMap<string, KeyObject>;
  /** Every key, the signing one first: for tokens issued before tokens carried a kid. */
  all: readonly KeyObject[];
}

/**
 * The kid of a key: 16 base64url characters (96 bits) of SHA-256 over a label and the key.
 * It names the key in headers and logs but reveals nothing of it, and every instance
 * configured with the same secret derives the same kid.
 */
export function keyId(secret: Buffer): string {
  return createHash('sha256').update('auth-service jwt kid v1\0').update(secret).digest('base64url').slice(0, 16);
}

/** The key ring for a signing secret and previous (verify-only) secrets, as raw bytes. */
export function signingKeysOf(current: Buffer, previous: readonly Buffer[] = []): SigningKeys {
  const signing = { kid: keyId(current), key: createSecretKey(current) };
  const byKid = new Map<string, KeyObject>([[signing.kid, signing.key]]);
  for (const secret of previous) {
    const kid = keyId(secret);
    if (!byKid.has(kid)) byKid.set(kid, createSecretKey(secret));
  }
  return { signing, byKid, all: [...byKid.values()] };
}

/**
 * The token keys: JWT_SECRET signs when set (required in production); otherwise a random
 * key generated once and kept in DATA_DIR, so tokens survive a restart of a development
 * instance. JWT_PREVIOUS_SECRETS are added for verification only.
 */
export async function loadSigningKeys(
  config: Pick<Config, 'JWT_SECRET' | 'JWT_PREVIOUS_SECRETS' | 'DATA_DIR' | 'NODE_ENV'>,
): Promise<SigningKeys> {
  const previous = (config.JWT_PREVIOUS_SECRETS ?? []).map((s) => Buffer.from(s, 'utf8'));
  return signingKeysOf(await currentSecret(config), previous);
}

async function currentSecret(config: Pick<Config, 'JWT_SECRET' | 'DATA_DIR'>): Promise<Buffer> {
  if (config.JWT_SECRET) return Buffer.from(config.JWT_SECRET, 'utf8');
  return Buffer.from(developmentKey(path.resolve(config.DATA_DIR, 'jwt.key')), 'base64url');
}
