import { PGlite, type PGliteInterface } from '@electric-sql/pglite';
import type { Db, QueryResult } from './db.ts';
import { runUnitOfWork } from './unit-of-work.ts';

/**
 * Opens PGlite (in memory when `dataDir` is undefined) behind the Db interface. PGlite has a
 * single connection and serializes statements itself; a transaction holds it until it ends.
 */
export async function openEmbedded(dataDir?: string): Promise<{ db: Db; pglite: PGlite }> {
  const pglite = await PGlite.create(dataDir ? { dataDir } : {});
  return { db: embeddedDb(pglite), pglite };
}

/** An open PGlite instance behind the Db interface (a clone of a migrated one, in the tests). */
export function embeddedDb(pglite: PGliteInterface): Db {
  let pending = 0;
  const wrap = async <T>(p: Promise<{ rows: unknown[]; affectedRows?: number }>): Promise<QueryResult<T>> => {
    pending++;
    try {
      const r = await p;
      return { rows: r.rows as T[], rowCount: r.affectedRows || r.rows.length };
    } finally {
      pending--;
    }
  };
  // QueryOptions.prepare is not passed on: one connection in this process, no planning cost worth keeping.
  const db: Db = {
    kind: 'embedded',
    query: (sql, params) => wrap(pglite.query(sql, params)),
    exec: async (sql) => void (await pglite.exec(sql)),
    transaction: (work) => runUnitOfWork((fn) =>
      pglite.transaction((t) =>
        fn({ query: (sql, params) => wrap(t.query(sql, params)), exec: async (sql) => void (await t.exec(sql)) }),
      ), work),
    // One process, one database: PGlite hands a commit's notifications to the listeners
    // before the committing statement's result.
    listen(channel, handlers) {
      const unlisten = pglite.listen(channel, handlers.notify).then((stop) => {
        handlers.listening(true);
        return stop;
      });
      return {
        async close() {
          handlers.listening(false);
          await (await unlisten)();
        },
      };
    },
    poolStats: () => ({ total: 1, idle: pending === 0 ? 1 : 0, waiting: Math.max(0, pending - 1) }),
    close: () => pglite.close(),
  };
  return db;
}
