import { createBcryptThreads } from './bcrypt-threads.ts';

/** bcrypt reads at most 72 bytes; longer passwords are refused rather than silently cut. */
export const MAX_PASSWORD_BYTES = 72;

/**
 * How many bcrypt operations run at once: as many as the libuv pool has threads, but one (the
 * pool's size is what an operator tunes for this machine's cores). They run on threads of their
 * own at a lower priority (./bcrypt-threads.ts), so a login storm keeps every core busy with
 * hashing while the event loop (token validation, /healthz, every other request) gets a core the
 * moment it needs one; libuv's pool stays free for its other users (fs, dns.lookup, async
 * crypto). Extra requests wait their turn, in order. Measured in docs/performance.md
 * ("Logins and the event loop").
 */
export const BCRYPT_CONCURRENCY = Math.max(1, threadPoolSize() - 1);

/** The libuv pool's size as the process was started with (read by libuv on first use). */
function threadPoolSize(): number {
  const configured = Number.parseInt(process.env.UV_THREADPOOL_SIZE ?? '', 10);
  return Number.isFinite(configured) && configured > 0 ? Math.min(configured, 1024) : 4;
}

const threads = createBcryptThreads(BCRYPT_CONCURRENCY);

/** bcrypt operations running now (at most BCRYPT_CONCURRENCY). */
export const bcryptInFlight = (): number => threads.busy();

/** bcrypt hash (on the bcrypt threads, not the event loop). */
export function hashPassword(password: string, cost: number): Promise<string> {
  return threads.hash(password, cost);
}

let dummyHash: Promise<string> | undefined;

/**
 * Computes the dummy hash ahead of the first unknown-user login, so that login does not
 * take two bcrypt operations' time (which would mark the name as unknown).
 */
export function prepareDummyHash(cost: number): void {
  dummyHash ??= threads.hash('dummy password for timing', cost);
  dummyHash.catch(() => {});
}

/**
 * Compares a password with a stored hash. With no hash (unknown user) it still spends one
 * bcrypt compare against a dummy hash of the same cost, so timing reveals nothing.
 */
export async function verifyPassword(password: string, hash: string | null, cost: number): Promise<boolean> {
  if (hash === null) {
    dummyHash ??= threads.hash('dummy password for timing', cost);
    const dummy = await dummyHash;
    await threads.compare(password, dummy);
    return false;
  }
  return threads.compare(password, hash);
}
