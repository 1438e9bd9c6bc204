import DataLoader from 'dataloader';
import { isOutageSqlState, SQLSTATE } from './sqlstate.ts';

/**
 * Coalesces the hot paths' one-row statements into few statements.
 *
 * Each HTTP request is parsed in its own I/O callback, so the default DataLoader schedule
 * (after the current tick) would see one key at a time; `setImmediate` waits until the
 * loop has handled every request that arrived together. And one statement of a loader is out
 * at a time (`inFlight`): the batch that fills while it is out goes when it returns. So under
 * load many requests share one round trip and one commit, and a lone request waits for
 * nothing but its own statement. A statement's own cost (its locks, its plan, its commit) is
 * several times that of a row: sending each turn's batch at once, whatever was out, made
 * statements of four or five rows under load (docs/performance.md, "History": one statement
 * out at a time per loader). A batch that has waited `stallMs` for a slow statement (a lock
 * wait, a checkpoint) goes all the same: a slow statement delays the others by that much at most.
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
  options: { maxBatchSize?: number; waitMs?: number; inFlight?: number; stallMs?: number } = {},
): DataLoader<K, V> {
  const { maxBatchSize = 500, waitMs = 0, inFlight = 1, stallMs = STALL_MS } = options;
  const gate = statementGate(inFlight, stallMs);
  const runAlone = async (key: K): Promise<V | Error> => {
    try {
      return (await run([key]))[0];
    } catch (err) {
      return err instanceof Error ? err : new Error(String(err));
    }
  };
  return new DataLoader<K, V>(
    // every batch the gate lets go comes here, with at least one key (nothing is cached)
    async (keys) => {
      try {
        return await run(keys);
      } catch (err) {
        if (keys.length === 1 || !refusedByDatabase(err)) throw err;
        // awaited, so the batch holds its place until the last retry is back (a review helper)
        return await Promise.all(keys.map(runAlone));
      } finally {
        gate.leave();
      }
    },
    {
      cache: false,
      maxBatchSize,
      // waitMs first, then the gate: a batch that waited for a statement out (filling meanwhile) goes when it returns
      batchScheduleFn: (callback) => {
        const enter = () => gate.enter(() => setImmediate(callback));
        if (waitMs > 0) setTimeout(enter, waitMs);
        else enter();
      },
    },
  );
}

/**
 * A batch loader for writes that answer nothing (audit rows, attempt records, stored tokens):
 * `write` gets every item of a batch; each caller's promise resolves once the statement that
 * carried its item has returned. Options as createBatchLoader's.
 */
export function createWriteBatch<K>(
  write: (items: readonly K[]) => Promise<void>,
  options: Parameters<typeof createBatchLoader>[1] = {},
): (item: K) => Promise<void> {
  const loader = createBatchLoader<K, true>(async (items) => {
    await write(items);
    return items.map(() => true as const);
  }, options);
  return async (item) => {
    await loader.load(item);
  };
}

/** How long a batch waits for the statement out before it goes all the same (ms): many times a statement's time under load. */
export const STALL_MS = 20;

/**
 * At most `limit` statements out at once: `enter(go)` runs `go` at once when fewer are out,
 * else when one returns (`leave`), or after `stallMs` whichever comes first; every `go` is
 * followed by exactly one `leave`. Written here: DataLoader schedules batches but does not
 * count them, and a general-purpose limiter (p-limit and the like) has no way to let a parked
 * batch go past a slow statement.
 */
function statementGate(limit: number, stallMs: number): { enter(go: () => void): void; leave(): void } {
  let out = 0;
  const parked: Array<() => void> = [];
  const start = (go: () => void) => {
    out++;
    go();
  };
  return {
    enter(go) {
      if (out < limit) return start(go);
      let gone = false;
      const release = () => {
        if (gone) return;
        gone = true;
        clearTimeout(timer);
        const at = parked.indexOf(release);
        if (at !== -1) parked.splice(at, 1);
        start(go);
      };
      const timer = setTimeout(release, stallMs);
      parked.push(release);
    },
    leave() {
      out--;
      while (out < limit && parked.length > 0) parked[0]();
    },
  };
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
  return createBatchLoader<K, R | null>(lookup(fetch, keyOf));
}

/**
 * As createLookupLoader, for reads that must not wait behind another statement (the OpenID
 * Connect provider's, src/oidc/adapter.ts): the keys asked for in one turn (until the current
 * promise jobs end) share one statement, sent at once however many are out. Nothing is cached.
 */
export function createTurnLookupLoader<K, R>(fetch: (keys: K[]) => Promise<R[]>, keyOf: (row: R) => K): DataLoader<K, R | null> {
  return new DataLoader<K, R | null>(lookup(fetch, keyOf), { cache: false });
}

/** A batch function reading each distinct key once: every key gets the row with its key, or null. */
function lookup<K, R>(fetch: (keys: K[]) => Promise<R[]>, keyOf: (row: R) => K): (keys: readonly K[]) => Promise<Array<R | null>> {
  return async (keys) => {
    const byKey = new Map((await fetch([...new Set(keys)])).map((row) => [keyOf(row), row]));
    return keys.map((key) => byKey.get(key) ?? null);
  };
}
