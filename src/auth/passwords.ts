import bcrypt from 'bcrypt';

/** bcrypt reads at most 72 bytes; longer passwords are refused rather than silently cut. */
export const MAX_PASSWORD_BYTES = 72;

/** Why a password cannot be set, or null when it can. */
export function passwordProblem(password: string): string | null {
  if (password.length < 8) return 'must be at least 8 characters';
  if (Buffer.byteLength(password, 'utf8') > MAX_PASSWORD_BYTES) return `must be at most ${MAX_PASSWORD_BYTES} bytes`;
  return null;
}

/** bcrypt hash (async: runs on the libuv pool, not the event loop). */
export function hashPassword(password: string, cost: number): Promise<string> {
  return bcrypt.hash(password, cost);
}

let dummyHash: Promise<string> | undefined;

/**
 * Computes the dummy hash ahead of the first unknown-user login, so that login does not
 * take two bcrypt operations' time (which would mark the name as unknown).
 */
export function prepareDummyHash(cost: number): void {
  dummyHash ??= bcrypt.hash('dummy password for timing', cost);
  dummyHash.catch(() => {});
}

/**
 * Compares a password with a stored hash. With no hash (unknown user) it still spends one
 * bcrypt compare against a dummy hash of the same cost, so timing reveals nothing.
 */
export async function verifyPassword(password: string, hash: string | null, cost: number): Promise<boolean> {
  if (hash === null) {
    dummyHash ??= bcrypt.hash('dummy password for timing', cost);
    await bcrypt.compare(password, await dummyHash);
    return false;
  }
  return bcrypt.compare(password, hash);
}
