import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** A new client secret: 32 random bytes, base64url (43 characters). */
export function generateClientSecret(): string {
  return randomBytes(32).toString('base64url');
}

/**
 * SHA-256 of a client secret, hex. A 256-bit random secret needs no slow KDF, and the hot
 * paths check it on every call.
 */
export function hashClientSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** Constant-time comparison of a presented secret with a stored hash. */
export function secretMatches(secret: string, storedHash: string): boolean {
  return matchesHash(Buffer.from(hashClientSecret(secret), 'hex'), storedHash);
}

/**
 * Whether a presented secret matches any of the stored hashes (the current secret, and the
 * previous one during its grace; null for none). The secret is hashed once and compared
 * with every slot in constant time, so the answer takes as long whichever matched.
 */
export function secretMatchesAny(secret: string, storedHashes: ReadonlyArray<string | null>): boolean {
  const presented = Buffer.from(hashClientSecret(secret), 'hex');
  let ok = false;
  for (const stored of storedHashes) ok = matchesHash(presented, stored ?? NO_HASH) || ok;
  return ok;
}

/** Compared with when there is no previous secret: no secret hashes to all zeros. */
const NO_HASH = '0'.repeat(64);

function matchesHash(presented: Buffer, storedHash: string): boolean {
  const stored = Buffer.from(storedHash, 'hex');
  return presented.length === stored.length && timingSafeEqual(presented, stored);
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
