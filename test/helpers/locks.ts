import type { Db } from '../../src/db/db.ts';

/**
 * Runs `sql` in a transaction of its own and keeps that transaction (and the row or table
 * locks it took) open until the returned function is called; that function resolves once it
 * has committed. PostgreSQL only: the embedded database has one connection, which this would
 * keep from everyone else.
 */
export async function holdLocks(db: Db, sql: string, params: unknown[] = []): Promise<() => Promise<void>> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => { release = resolve; });
  let taken!: () => void;
  const locked = new Promise<void>((resolve) => { taken = resolve; });
  const done = db.transaction(async (tx) => {
    await tx.query(sql, params);
    taken();
    await released;
  });
  await Promise.race([locked, done]);
  return async () => {
    release();
    await done;
  };
}

/**
 * Waits until `count` statements of this database are waiting for a lock (a transaction held
 * by holdLocks, or one waiting behind it); throws after `timeoutMs`.
 */
export async function waitForLockWaiters(db: Db, count: number, timeoutMs = 15_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const r = await db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
    );
    if (r.rows[0].n >= count) return;
    if (Date.now() > until) throw new Error(`${r.rows[0].n} statements wait for a lock, not ${count}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
