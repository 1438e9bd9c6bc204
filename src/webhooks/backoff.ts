/** The first attempt plus three retries (docs/contract.md, "Webhooks": "retried 3 times"). */
export const MAX_ATTEMPTS = 4;

/** Jitter spreads retries of many deliveries that failed together (e.g. a receiver outage). */
const JITTER = 0.1;

/**
 * Delay before the next attempt after `attemptsMade` failed attempts (1-based): the base,
 * then four times longer each time (base, 4×base, 16×base), each within ±10% jitter so the
 * gaps still grow strictly. `random` is injectable for tests.
 */
export function retryDelayMs(attemptsMade: number, baseMs: number, random: () => number = Math.random): number {
  const exponent = Math.max(0, attemptsMade - 1);
  const nominal = baseMs * 4 ** exponent;
  return Math.round(nominal * (1 - JITTER + 2 * JITTER * random()));
}

/** Whether a delivery that has had `attemptsMade` attempts may be tried again. */
export function hasRetriesLeft(attemptsMade: number): boolean {
  return attemptsMade < MAX_ATTEMPTS;
}
