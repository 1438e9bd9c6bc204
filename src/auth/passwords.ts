import bcrypt from 'bcrypt';
import pLimit from 'p-limit';

/** bcrypt reads at most 72 bytes; longer passwords are refused rather than silently cut. */
export const MAX_PASSWORD_BYTES = 72;

/**
 * How many bcrypt operations run at once: as many as the libuv pool has threads, but one (the
 * pool's size is what an operator tunes for this machine's cores). They run on that pool
 * (bcrypt's own asynchronous functions), whose threads scripts/pool-priority.cjs lowers to nice
 * +10 at start, so a login storm keeps every core busy with hashing while the event loop (token
 * validation, /healthz, every other request) gets a core the moment it needs one; the thread
 * left over serves the pool's other users (fs, dns.lookup, async crypto) without waiting behind
 * a hash. Extra operations wait their turn, in order. Measured in docs/performance.md ("Logins
 * and the event loop").
 */
export const BCRYPT_CONCURRENCY = Math.max(1, threadPoolSize() - 1);

/** What scripts/pool-priority.cjs leaves on globalThis, when the process was started with it. */
interface PoolPriority { nice: number; threads: readonly number[]; size: number }
function preloaded(): PoolPriority | undefined {
  return (globalThis as Record<symbol, unknown>)[Symbol.for('auth-service.pool-priority')] as PoolPriority | undefined;
}

/**
 * The libuv pool's size: as the preload counted its threads, else as libuv reads
 * UV_THREADPOOL_SIZE (its C `atoi`: leading digits, anything else 0; 0 means 1, more than 1024
 * or a negative number 1024), so an odd value leaves a thread free as libuv sees it.
 */
export function threadPoolSize(value = process.env.UV_THREADPOOL_SIZE, counted = preloaded()?.size): number {
  if (counted !== undefined && counted > 0) return counted;
  if (value === undefined) return 4;
  const read = Number.parseInt(value, 10) || 0;
  if (read === 0) return 1;
  return read < 0 || read > 1024 ? 1024 : read;
}

const limit = pLimit(BCRYPT_CONCURRENCY);

/** bcrypt operations running now (at most BCRYPT_CONCURRENCY). */
export const bcryptInFlight = (): number => limit.activeCount;

/**
 * What scripts/pool-priority.cjs did to libuv's pool, where bcrypt runs: the thread ids it
 * lowered and by how much. `lowered` is false when the process was started without it (plain
 * `node dist/server.js`, the tests) or it could not tell the pool's threads (not Linux): bcrypt
 * then runs at the process's priority, which the server says at start.
 */
export function bcryptPriority(): { lowered: boolean; nice: number; threads: readonly number[] } {
  const marker = preloaded();
  return marker && marker.threads.length > 0
    ? { lowered: true, nice: marker.nice, threads: marker.threads }
    : { lowered: false, nice: 0, threads: [] };
}

/** bcrypt hash (on libuv's pool, not the event loop). */
export function hashPassword(password: string, cost: number): Promise<string> {
  return limit(() => bcrypt.hash(password, cost));
}

function comparePassword(password: string, hash: string): Promise<boolean> {
  return limit(() => bcrypt.compare(password, hash));
}

let dummyHash: Promise<string> | undefined;

/**
 * Computes the dummy hash ahead of the first unknown-user login, so that login does not
 * take two bcrypt operations' time (which would mark the name as unknown).
 */
export function prepareDummyHash(cost: number): void {
  dummyHash ??= hashPassword('dummy password for timing', cost);
  dummyHash.catch(() => {});
}

/**
 * Compares a password with a stored hash. With no hash (unknown user) it still spends one
 * bcrypt compare against a dummy hash of the same cost, so timing reveals nothing.
 */
export async function verifyPassword(password: string, hash: string | null, cost: number): Promise<boolean> {
  if (hash === null) {
    dummyHash ??= hashPassword('dummy password for timing', cost);
    const dummy = await dummyHash;
    await comparePassword(password, dummy);
    return false;
  }
  return comparePassword(password, hash);
}
