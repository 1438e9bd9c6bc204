import { MemoryStore, type Options, type Store } from 'express-rate-limit';

/**
 * A limit on failures rather than on requests: each failure of an address is counted in the
 * rate limiter's store (Redis when REDIS_URL is set, so every instance counts into one
 * total); once the count passes `limit` within the window, that address is refused before
 * anything is checked until the window ends.
 *
 * Why not an express-rate-limit limiter with skipSuccessfulRequests: that counts every
 * request and takes the count back on success, two store round trips on each of the hot
 * routes' requests, where failures are rare. Here a success costs one lookup in this
 * instance's map of refused addresses; the store is asked only on a failure. Another
 * instance learns of a refused address at that address's next failure there, which the
 * shared count refuses at once: guesses stay bounded across instances, but until then that
 * instance still serves the address's requests with the right secret. `keyOf` groups
 * addresses as the other per-address limits do (addressKey, src/http/rate-limit.ts).
 */
export interface FailureLimit {
  /** Seconds this address must wait before it is heard again, or 0; more than 0 refuses the request. */
  refusedFor(address: string): number;
  /** Counts one failure of `address`: the seconds it is now refused for, or 0; more than 0 refuses the request. */
  count(address: string): Promise<number>;
}

/** How many refused addresses one instance remembers: past that the oldest are forgotten (their count stays in the store). */
const MAX_REFUSED = 10_000;

export function createFailureLimit(
  limit: number, windowMs: number, store: Store = new MemoryStore(), keyOf: (address: string) => string = (address) => address,
  /** Called for each request refused (the metric auth_rate_limited_total). */
  onRefusal: () => void = () => {},
): FailureLimit {
  // With Redis down at start the store's script load fails: the other limiters already warned
  // of it, and the first count afterwards loads it again or reports the outage (503)
  Promise.resolve(store.init?.({ windowMs } as Options)).catch(() => {});
  /** Address -> when its refusal ends (ms). */
  const refused = new Map<string, number>();
  const waitOf = (until: number) => Math.max(1, Math.ceil((until - Date.now()) / 1000));
  return {
    refusedFor(address) {
      if (refused.size === 0) return 0;
      const key = keyOf(address);
      const until = refused.get(key);
      if (until === undefined) return 0;
      if (until > Date.now()) {
        onRefusal();
        return waitOf(until);
      }
      refused.delete(key);
      return 0;
    },
    async count(address) {
      const key = keyOf(address);
      const { totalHits, resetTime } = await store.increment(key);
      if (totalHits <= limit) return 0;
      const until = resetTime?.getTime() ?? Date.now() + windowMs;
      if (refused.size >= MAX_REFUSED) refused.delete(refused.keys().next().value!);
      refused.set(key, until);
      onRefusal();
      return waitOf(until);
    },
  };
}
