import os from 'node:os';
import bcrypt from 'bcrypt';

/** bcrypt reads at most 72 bytes; longer passwords are refused rather than silently cut. */
export const MAX_PASSWORD_BYTES = 72;

/**
 * How many bcrypt operations run at once. They run on the libuv thread pool (4 threads by
 * default), which fs, dns.lookup and crypto share, and each keeps a core busy for ~0.25 s
 * at cost 12. Running one per core would leave the event loop (token validation, /healthz,
 * every other request) competing with them for CPU, and filling the pool would stall every
 * other pool user. So: one core and one pool thread are always left free (at least one
 * operation on a single core). Extra requests wait their turn here, in order.
 */
const BCRYPT_CONCURRENCY = Math.max(1, Math.min(os.availableParallelism() - 1, Number(process.env.UV_THREADPOOL_SIZE ?? 4) - 1));
let running = 0;
const waiting: Array<() => void> = [];

async function limited<T>(work: () => Promise<T>): Promise<T> {
  if (running >= BCRYPT_CONCURRENCY) await new Promise<void>((resolve) => waiting.push(resolve));
  else running++;
  try {
    return await work();
  } finally {
    const next = waiting.shift();
    if (next) next(); // the slot passes straight to the next waiter
    else running--;
  }
}

/** bcrypt hash (async: runs on the libuv pool, not the event loop). */
export function hashPassword(password: string, cost: number): Promise<string> {
  return limited(() => bcrypt.hash(password, cost));
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
    const dummy = await dummyHash;
    await limited(() => bcrypt.compare(password, dummy));
    return false;
  }
  return limited(() => bcrypt.compare(password, hash));
}
