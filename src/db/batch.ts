import DataLoader from 'dataloader';
import { isOutageSqlState, SQLSTATE } from './sqlstate.ts';

/**
 * Coalesces the hot paths' one-row statements into one statement per turn of the event loop.
 *
 * Each HTTP request is parsed in its own I/O callback, so the default DataLoader schedule
 * (after the current tick) would see one key at a time; `setImmediate` waits until the
 * loop has handled every request that arrived together. While one statement is out, the
 * next batch fills, so under load many requests share one round trip and one commit, and
 * a lone request waits for nothing but its own statement.
 *
 * Nothing is cached: every `load` goes to the database (a rotated secret or a consumed
 * token must be seen at once, on every instance). When the database refuses the statement
 * for a batch, each of its requests is tried again alone, so a request whose row the database
 * refuses (a user deleted a moment ago) fails by itself and takes no other request with it.
 * Any other failure (a lost connection, a read timeout) may have come after the statement
 * committed, and a retry would meet the batch's own work (a token it consumed, a jti it
 * inserted): every request of the batch gets that failure, an outage (503), instead (a review
 * helper, 2026-11-27).
 *
 * `waitMs` holds a batch open that long instead (for writes nobody waits on, such as the
 * record of a webhook attempt): fewer, larger statements when requests arrive spread out.
 */
export function createBatchLoader<K, V>(
  run: (keys: readonly K[]) => Promise<ArrayLike<V | Error>>,
  options: { maxBatchSize?: number; waitMs?: number } = {},
): DataLoader<K, V> {
  const { maxBatchSize = 500, waitMs = 0 } = options;
  const runAlone = async (key: K): Promise<V | Error> => {
    try {
      return (await run([key]))[0];
    } catch (err) {
      return err instanceof Error ? err : new Error(String(err));
    }
  };
  return new DataLoader<K, V>(
    async (keys) => {
      try {
        return await run(keys);
      } catch (err) {
        if (keys.length === 1 || !refusedByDatabase(err)) throw err;
        return Promise.all(keys.map(runAlone));
      }
    },
    { cache: false, maxBatchSize, batchScheduleFn: (callback) => (waitMs > 0 ? setTimeout(callback, waitMs) : setImmediate(callback)) },
  );
}

/**
 * Whether the database refused the statement itself: an error with a SQLSTATE that is no
 * outage (isOutageSqlState) and none of the rest of classes 57 (operator intervention), 58 and
 * XX (system errors). Such a statement did nothing.
 */
function refusedByDatabase(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && SQLSTATE.test(code) && !isOutageSqlState(code) && !/^(57|58|XX)/.test(code);
}

/**
 * A batch loader that reads rows by key: `fetch` gets each distinct key once and returns the
 * rows that exist, in any order; every request gets the row with its key, or null.
 */
export function createLookupLoader<K, R>(fetch: (keys: K[]) => Promise<R[]>, keyOf: (row: R) => K): DataLoader<K, R | null> {
  return createBatchLoader<K, R | null>(async (keys) => {
    const byKey = new Map((await fetch([...new Set(keys)])).map((row) => [keyOf(row), row]));
    return keys.map((key) => byKey.get(key) ?? null);
  });
}
