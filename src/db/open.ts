import { mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import type { Config } from '../config.ts';
import type { Db } from './db.ts';
import { openPostgres } from './postgres.ts';

const SOCKET_PORT = 5432;

/** Where the embedded database lives and how it is reached while the service runs. */
export function embeddedPaths(dataDir: string) {
  const dir = path.resolve(dataDir);
  return {
    dir,
    pgdata: path.join(dir, 'pgdata'),
    lock: path.join(dir, 'embedded.lock'),
    socket: path.join(dir, `.s.PGSQL.${SOCKET_PORT}`),
  };
}

/**
 * Which database a configuration names, for the people running commands: "PostgreSQL
 * db on host:port as user" (never the password) or "the embedded database in /abs/data".
 * The admin command line and the seed command print it, so nobody writes to the wrong one.
 */
export function describeDatabase(config: Pick<Config, 'DATABASE_URL' | 'DATA_DIR'>): string {
  if (!config.DATABASE_URL) return `the embedded database in ${embeddedPaths(config.DATA_DIR).dir}`;
  const url = new URL(config.DATABASE_URL);
  const database = decodeURIComponent(url.pathname.replace(/^\//, '')) || '(default database)';
  const host = url.hostname || url.searchParams.get('host') || 'localhost';
  const user = url.username ? ` as ${decodeURIComponent(url.username)}` : '';
  return `PostgreSQL database ${database} on ${host}:${url.port || 5432}${user}`;
}

/**
 * Opens the configured store. On PostgreSQL: a pool. Embedded: PGlite allows one process,
 * so the opener takes a lock file; with `serve` (the service) it also serves the database
 * on a Unix socket in DATA_DIR for the admin command line and psql. An opener that finds
 * the lock held by a live process connects through that socket instead (the command line),
 * or refuses (a second service): never two writers on one data directory.
 */
export async function openDatabase(
  config: Pick<Config, 'DATABASE_URL' | 'DATA_DIR'> & Partial<Pick<Config, 'DATABASE_STATEMENT_TIMEOUT'>>,
  options: { serve: boolean },
): Promise<Db> {
  if (config.DATABASE_URL) return openPostgres(config.DATABASE_URL, { statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT });
  const paths = embeddedPaths(config.DATA_DIR);
  await mkdir(paths.dir, { recursive: true });
  const holder = await acquireLock(paths.lock);
  if (holder !== null) {
    if (options.serve) {
      throw new Error(`The embedded database in ${paths.dir} is in use by process ${holder}; set DATABASE_URL to run several instances`);
    }
    // The socket's connections all share the service's one PGlite session: a statement one
    // command prepared would already exist for the next, so nothing is prepared there.
    return openPostgres({ host: paths.dir, port: SOCKET_PORT, user: 'postgres', database: 'postgres' }, { max: 1, prepare: false });
  }
  try {
    // PGlite (a WebAssembly PostgreSQL) is loaded only here: a service on PostgreSQL never loads it
    const { openEmbedded, socketFacade } = await import('./embedded.ts');
    const { db, pglite } = await openEmbedded(paths.pgdata);
    let server: PGLiteSocketServer | undefined;
    if (options.serve) {
      await unlink(paths.socket).catch(() => {});
      const { PGLiteSocketServer } = await import('@electric-sql/pglite-socket');
      // a command's transaction holds the service's statements off until it ends (socketFacade)
      server = new PGLiteSocketServer({ db: socketFacade(pglite), path: paths.socket, maxConnections: 8 });
      await server.start();
    }
    return {
      ...db,
      async close() {
        await server?.stop();
        await db.close();
        await releaseLock(paths.lock);
      },
    };
  } catch (err) {
    await releaseLock(paths.lock);
    throw err;
  }
}

/** The lock files this process took and has not given back. */
const locksHeld = new Set<string>();

/** Gives back a lock file taken by acquireLock. */
async function releaseLock(lockPath: string): Promise<void> {
  locksHeld.delete(lockPath);
  await unlink(lockPath).catch(() => {});
}

/** Takes the lock file; returns null when taken, else the pid of the live process holding it. */
async function acquireLock(lockPath: string): Promise<number | null> {
  for (let i = 0; i < 3; i++) {
    try {
      await writeFile(lockPath, String(process.pid), { flag: 'wx' });
      locksHeld.add(lockPath);
      return null;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const pid = Number.parseInt(await readFile(lockPath, 'utf8').catch(() => ''), 10);
    // This process's own pid in a lock it did not take is left by an earlier life of the same
    // pid (a container's pid 1 killed with SIGKILL and started again): stale.
    const ownStale = pid === process.pid && !locksHeld.has(lockPath);
    if (Number.isInteger(pid) && pid > 0 && !ownStale && isAlive(pid)) return pid;
    await unlink(lockPath).catch(() => {}); // stale: its process is gone
  }
  throw new Error(`Could not take the lock ${lockPath}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
