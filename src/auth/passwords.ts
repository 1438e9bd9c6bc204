import bcrypt from 'bcrypt';

/** bcrypt reads at most 72 bytes; longer passwords are refused rather than silently cut. */
export const MAX_PASSWORD_BYTES = 72;

/**
 * How many bcrypt operations run at once: every thread of the libuv pool but one. bcrypt runs
 * there, not on the event loop, so a login storm keeps every core busy with hashing while
 * the event loop (token validation, /healthz, every other request) still gets its share of
 * the CPU from the operating system. The one thread left free is for the pool's other users
 * (fs, dns.lookup, async crypto), which would otherwise queue behind seconds of hashing.
 * The pool has 4 threads unless UV_THREADPOOL_SIZE says otherwise; extra requests wait their
 * turn here, in order. Measured in docs/performance.md ("Logins and the event loop").
 */
export const BCRYPT_CONCURRENCY = Math.max(1, threadPoolSize() - 1);

/** The libuv pool's size as the process was started with (read by libuv on first use). */
function threadPoolSize(): number {
  const configured = Number.parseInt(process.env.UV_THREADPOOL_SIZE ?? '', 10);
  return Number.isFinite(configured) && configured > 0 ? Math.min(configured, 1024) : 4;
}

let running = 0;

/** bcrypt operations running now (at most BCRYPT_CONCURRENCY). */
export const bcryptInFlight = (): number => running;
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
