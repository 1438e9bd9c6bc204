import DataLoader from 'dataloader';

/**
 * Coalesces the hot paths' one-row queries into one statement per turn of the event loop.
 *
 * Each HTTP request is parsed in its own I/O callback, so the default DataLoader schedule
 * (after the current tick) would see one key at a time; `setImmediate` waits until the
 * loop has handled every request that arrived together. While one statement is out, the
 * next batch fills, so under load many requests share one round trip and one commit, and
 * a lone request waits for nothing but its own statement.
 *
 * Nothing is cached: every `load` goes to the database (a rotated secret or a consumed
 * token must be seen at once, on every instance). A failed statement fails every request
 * of its batch with the same error.
 */
export function createBatchLoader<K, V>(run: (keys: readonly K[]) => Promise<ArrayLike<V | Error>>, maxBatchSize = 500): DataLoader<K, V> {
  return new DataLoader<K, V>(run, {
    cache: false,
    maxBatchSize,
    batchScheduleFn: (callback) => setImmediate(callback),
  });
}
