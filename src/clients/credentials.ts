import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

/** A new client secret: 32 random bytes, base64url (43 characters). */
export function generateClientSecret(): string {
  return randomBytes(32).toString('base64url');
}

/**
 * SHA-256 of a client secret, hex. A 256-bit random secret needs no slow KDF, and the hot
 * paths check it on every call.
 */
export function hashClientSecret(secret: string): string {
  return hash('sha256', secret, 'hex');
}

/**
 * The same SHA-256 as bytes. crypto.hash is the one-shot form: no Hash object per call, half
 * the time of createHash's for a secret's 43 characters (the hot routes check one per request).
 */
function secretDigest(secret: string): Buffer {
  return hash('sha256', secret, 'buffer');
}

/** Constant-time comparison of a presented secret with a stored hash. */
export function secretMatches(secret: string, storedHash: string): boolean {
  return matchesHash(secretDigest(secret), storedHash);
}

/**
 * Whether a presented secret matches any of the stored hashes (the current secret, and the
 * previous one during its grace; null for none). The secret is hashed once and compared
 * with every slot in constant time, so the answer takes as long whichever matched.
 */
export function secretMatchesAny(secret: string, storedHashes: ReadonlyArray<string | null>): boolean {
  const presented = secretDigest(secret);
  let ok = false;
  for (const stored of storedHashes) ok = matchesHash(presented, stored ?? NO_HASH) || ok;
  return ok;
}

/** Compared with when there is no previous secret: no secret hashes to all zeros. */
const NO_HASH = '0'.repeat(64);

function matchesHash(presented: Buffer, storedHash: string): boolean {
  const stored = storedBytes(storedHash);
  return presented.length === stored.length && timingSafeEqual(presented, stored);
}

/** Stored hashes' bytes kept at most; past it the memo starts again. */
const STORED_KEPT = 1000;
const storedByHex = new Map<string, Buffer>();

/**
 * The bytes of a stored hash, decoded once: the hot routes compare every request's secret
 * with the same few clients' hashes, and decoding both slots' hex each time cost as much as
 * hashing the secret. The buffers are only ever read.
 */
function storedBytes(storedHash: string): Buffer {
  let bytes = storedByHex.get(storedHash);
  if (bytes === undefined) {
    if (storedByHex.size >= STORED_KEPT) storedByHex.clear();
    bytes = Buffer.from(storedHash, 'hex');
    storedByHex.set(storedHash, bytes);
  }
  return bytes;
}

/** What is shown instead of a secret after creation: dots and its last four characters. */
export function maskSecret(last4: string): string {
  return `••••••••${last4}`;
}

/** A client_id derived from a display name, with a random suffix to keep it unique. */
export function generateClientId(name: string): string {
  const slug = name.normalize('NFKD').toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '').slice(0, 32);
  return `${slug || 'client'}-${randomBytes(4).toString('hex')}`;
}
