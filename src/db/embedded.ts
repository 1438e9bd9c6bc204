import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { promisify } from 'node:util';
import { PGlite, type PGliteInterface } from '@electric-sql/pglite';
import { pg_trgm } from '@electric-sql/pglite/contrib/pg_trgm';
import { EMBEDDED_SHARED_BUFFERS } from '../config.ts';
import type { Db, QueryResult } from './db.ts';
import { runUnitOfWork } from './unit-of-work.ts';

/** How much memory the embedded PostgreSQL may keep (README, Configuration: EMBEDDED_SHARED_BUFFERS). */
export interface EmbeddedMemory {
  /** PostgreSQL's shared_buffers, e.g. `16MB`: the page cache inside PGlite's WebAssembly memory. */
  sharedBuffers?: string;
}

/**
 * Opens PGlite (in memory when `dataDir` is undefined) behind the Db interface. PGlite has a
 * single connection and serializes statements itself; a transaction holds it until it ends.
 *
 * A WebAssembly memory only ever grows: whatever PGlite needed once stays resident for the
 * life of the process. Creating a database (initdb) needs several hundred MiB, so a data
 * directory that does not exist yet is created by a short-lived child process, and this
 * process opens the finished one.
 */
export async function openEmbedded(dataDir?: string, memory: EmbeddedMemory = {}): Promise<{ db: Db; pglite: PGlite }> {
  if (dataDir && !existsSync(`${dataDir}/PG_VERSION`)) await createDataDirInChild(dataDir);
  const startParams = [...PGlite.defaultStartParams, '-c', `shared_buffers=${memory.sharedBuffers ?? EMBEDDED_SHARED_BUFFERS}`];
  // pg_trgm: the user search's trigram index (migrations/0030, 0031); a clone() keeps the extensions
  const pglite = await PGlite.create({ ...(dataDir ? { dataDir } : {}), startParams, extensions: { pg_trgm } });
  return { db: embeddedDb(pglite), pglite };
}

const run = promisify(execFile);

/**
 * Creates a PGlite data directory in a child process, under a temporary name renamed into
 * place once complete: a creation cut short leaves no half-made `dataDir` behind.
 */
async function createDataDirInChild(dataDir: string): Promise<void> {
  const building = `${dataDir}.creating-${process.pid}`;
  await rm(building, { recursive: true, force: true });
  const code = 'const { PGlite } = await import(process.argv[1]); const p = await PGlite.create({ dataDir: process.argv[2] }); await p.close();';
  try {
    await run(process.execPath, ['--input-type=module', '-e', code, import.meta.resolve('@electric-sql/pglite'), building], { maxBuffer: 16 * 1024 * 1024 });
    await rename(building, dataDir);
  } catch (err) {
    await rm(building, { recursive: true, force: true });
    throw new Error(`Could not create the embedded database in ${dataDir}: ${(err as { stderr?: string }).stderr?.trim() || (err as Error).message}`, { cause: err });
  }
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

/**
 * What the socket server (the command line's way in while the service runs: src/db/open.ts)
 * is given in place of PGlite itself. pglite-socket keeps single protocol messages exclusive
 * (runExclusive: PGlite's query lock); the service's own queries and transactions take
 * PGlite's transaction lock, which a command's transaction on the socket never held, so they
 * ran inside it, on PGlite's one session: a command that failed and rolled back undid writes
 * the service had already answered for (a token's use, so the token validated twice), and
 * the service's COMMIT could end a command's transaction half-way (a review helper,
 * 2026-11-27). Here every socket message also takes the transaction lock, and keeps it while
 * the message leaves the session inside a transaction, until that transaction ends (its
 * COMMIT or ROLLBACK, or the ROLLBACK the socket server sends for a client that went away).
 * pglite-socket's queue hands one message at a time, and only the open transaction's own
 * client's messages while one is open.
 */
export function socketFacade(pglite: PGlite): PGlite {
  // PGlite's own lock for query(), exec() and transaction(): not in its typings
  const exclusive = (pglite as unknown as { _runExclusiveTransaction?: (fn: () => Promise<void>) => Promise<void> })._runExclusiveTransaction?.bind(pglite);
  if (!exclusive) throw new Error('This version of PGlite has no transaction lock to share with its socket (src/db/embedded.ts socketFacade)');
  /** Ends the hold of a socket client's open transaction. */
  let heldOpen: (() => void) | null = null;
  const releaseIfEnded = () => {
    if (heldOpen && !pglite.isInTransaction()) {
      const release = heldOpen;
      heldOpen = null;
      release();
    }
  };
  const run = <T>(work: () => Promise<T>): Promise<T> => {
    // inside a socket client's transaction, which holds the lock already
    if (heldOpen) return pglite.runExclusive(work).finally(releaseIfEnded);
    return new Promise<T>((resolve, reject) => {
      exclusive(async () => {
        try {
          resolve(await pglite.runExclusive(work));
        } catch (err) {
          reject(err);
        }
        // the message opened a transaction: the lock is kept until it ends
        if (pglite.isInTransaction()) await new Promise<void>((release) => { heldOpen = release; });
      }).catch(reject);
    });
  };
  const facade = {
    get waitReady() {
      return pglite.waitReady;
    },
    isInTransaction: () => pglite.isInTransaction(),
    execProtocolRawStream: (...args: Parameters<PGlite['execProtocolRawStream']>) => pglite.execProtocolRawStream(...args),
    runExclusive: run,
    // the socket server's ROLLBACK for a client that went away inside its transaction
    exec: (sql: string) => run(() => pglite.execProtocolRaw(simpleQuery(sql))),
  };
  return facade as unknown as PGlite;
}

/** A protocol message for a simple query: 'Q', its length, the SQL, a zero byte. */
function simpleQuery(sql: string): Uint8Array {
  const text = Buffer.from(sql + '\0', 'utf8');
  const message = Buffer.alloc(5 + text.length);
  message.write('Q', 0, 'latin1');
  message.writeInt32BE(4 + text.length, 1);
  text.copy(message, 5);
  return message;
}
