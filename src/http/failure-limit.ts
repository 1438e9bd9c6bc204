import { MemoryStore, type Options, type Store } from 'express-rate-limit';

/**
 * A limit on failures rather than on requests, per caller address and client id: each failed
 * authentication is counted under (address, client id) in the rate limiter's store (Redis
 * when REDIS_URL is set, so every instance counts into one total); once the count passes
 * `limit` within the window, further failures of that address for that client id are
 * answered 429 until the window ends. The caller asks only after the credentials failed: a
 * request whose credentials are right is never refused here, whatever other requests from
 * its address did. Client back ends often share one egress address (a NAT, a cluster), and
 * refusing the address refused every neighbour, and the guessed client itself, with its right
 * secret. Guessing gains nothing from it: a secret is 256 random bits, and the guesses at
 * one client id from one address stay bounded.
 *
 * Why not an express-rate-limit limiter with skipSuccessfulRequests: that counts every
 * request and takes the count back on success, two store round trips on each of the hot
 * routes' requests, where failures are rare. Here a success costs nothing; a failure one
 * lookup in this instance's map of refused keys, and the store is asked only while the key is
 * not refused yet. Another instance learns of a refused key at that key's next failure there,
 * which the shared count refuses at once. `keyOf` groups addresses as the other per-address
 * limits do (addressKey, src/http/rate-limit.ts).
 */
export interface FailureLimit {
  /** Seconds failures of this address at this client id must wait before they are heard again, or 0; more than 0 refuses the failed request. */
  refusedFor(address: string, clientId: string): number;
  /** Counts one failure of `address` at `clientId`: the seconds it is now refused for, or 0; more than 0 refuses the request. */
  count(address: string, clientId: string): Promise<number>;
}

/** How many refused keys one instance remembers: past that the oldest are forgotten (their count stays in the store). */
const MAX_REFUSED = 10_000;

export function createFailureLimit(
  limit: number, windowMs: number, store: Store = new MemoryStore(), keyOf: (address: string) => string = (address) => address,
  /** Called for each request refused (the metric auth_rate_limited_total). */
  onRefusal: () => void = () => {},
): FailureLimit {
  // With Redis down at start the store's script load fails: the other limiters already warned
  // of it, and the first count afterwards loads it again or reports the outage (503)
  Promise.resolve(store.init?.({ windowMs } as Options)).catch(() => {});
  /** Key (address group and client id) -> when its refusal ends (ms). */
  const refused = new Map<string, number>();
  // a client id is at most 256 characters (the body schema), so a key stays small
  const keyFor = (address: string, clientId: string) => `${keyOf(address)} ${clientId}`;
  const waitOf = (until: number) => Math.max(1, Math.ceil((until - Date.now()) / 1000));
  return {
    refusedFor(address, clientId) {
      if (refused.size === 0) return 0;
      const key = keyFor(address, clientId);
      const until = refused.get(key);
      if (until === undefined) return 0;
      if (until > Date.now()) {
        onRefusal();
        return waitOf(until);
      }
      refused.delete(key);
      return 0;
    },
    async count(address, clientId) {
      const key = keyFor(address, clientId);
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
