import { chmod, mkdir, readFile, stat, unlink } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import path from 'node:path';
import type { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import type { Config } from '../config.ts';
import { createWhole } from '../config/create-whole.ts';
import { tightenPrivateDir, usePrivateUmask } from '../config/private-dir.ts';
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
  config: Pick<Config, 'DATABASE_URL' | 'DATA_DIR'> & Partial<Pick<Config, 'DATABASE_STATEMENT_TIMEOUT' | 'EMBEDDED_SHARED_BUFFERS'>>,
  options: { serve: boolean },
): Promise<Db> {
  if (config.DATABASE_URL) return openPostgres(config.DATABASE_URL, { statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT });
  const paths = embeddedPaths(config.DATA_DIR);
  // the socket the service serves (and a command reaches it by) must fit a Unix socket's path:
  // Node cut a longer one short without a word, and the file it left stopped the next start
  if (options.serve) refuseLongSocketPath(paths);
  // the database's files are this user's alone, whatever the umask it was started with
  // (src/config/private-dir.ts; the service also tightens what an older version left looser)
  usePrivateUmask();
  await mkdir(paths.dir, { recursive: true, mode: 0o700 });
  await chmod(paths.dir, 0o700);
  const holder = await acquireLock(paths.lock);
  if (holder !== null) {
    if (options.serve) {
      throw new Error(`The embedded database in ${paths.dir} is in use by process ${holder}; set DATABASE_URL to run several instances`);
    }
    refuseLongSocketPath(paths);
    // only the service serves the socket; another command holding the database serves none
    if (!(await stat(paths.socket).then((st) => st.isSocket(), () => false))) {
      throw new Error(`The embedded database in ${paths.dir} is in use by process ${holder}, which does not serve it (another command, or the service still starting); try again when it ends`);
    }
    // The socket's connections all share the service's one PGlite session: a statement one
    // command prepared would already exist for the next, so nothing is prepared there.
    return openPostgres({ host: paths.dir, port: SOCKET_PORT, user: 'postgres', database: 'postgres' }, { max: 1, prepare: false });
  }
  try {
    // PGlite (a WebAssembly PostgreSQL) is loaded only here: a service on PostgreSQL never loads it
    const { openEmbedded, socketFacade } = await import('./embedded.ts');
    const { db, pglite } = await openEmbedded(paths.pgdata, { sharedBuffers: config.EMBEDDED_SHARED_BUFFERS });
    // PGlite lays out a new database's files 0666 whatever the umask (its file system sets the
    // modes of the files it unpacks), and writes a few later 0644: they are closed here, after
    // the open (which also closes what an older version left open), and again after the close
    await tightenPrivateDir(paths.dir, { create: false });
    let server: PGLiteSocketServer | undefined;
    if (options.serve) {
      await unlink(paths.socket).catch(() => {});
      const { PGLiteSocketServer } = await import('@electric-sql/pglite-socket');
      // a command's transaction holds the service's statements off until it ends (socketFacade)
      server = new PGLiteSocketServer({ db: socketFacade(pglite), path: paths.socket, maxConnections: 8 });
      await server.start();
      await chmod(paths.socket, 0o600); // the database without a password: this user's only
    }
    return {
      ...db,
      async close() {
        await server?.stop();
        await db.close();
        await tightenPrivateDir(paths.dir, { create: false }).catch(() => {});
        await releaseLock(paths.lock);
      },
    };
  } catch (err) {
    await releaseLock(paths.lock);
    throw err;
  }
}

/** The longest path a Unix socket can have on Linux (sun_path holds 108 bytes, the last a NUL). */
const MAX_SOCKET_PATH_BYTES = 107;

function refuseLongSocketPath(paths: ReturnType<typeof embeddedPaths>): void {
  if (Buffer.byteLength(paths.socket) > MAX_SOCKET_PATH_BYTES) {
    throw new Error(`DATA_DIR ${paths.dir} is too long for the embedded database's socket (${paths.socket} is ${Buffer.byteLength(paths.socket)} bytes; `
      + `a Unix socket's path may have ${MAX_SOCKET_PATH_BYTES}): choose a shorter DATA_DIR`);
  }
}

/** The lock files this process took and has not given back. */
const locksHeld = new Set<string>();

/** Gives back a lock file taken by acquireLock. */
async function releaseLock(lockPath: string): Promise<void> {
  locksHeld.delete(lockPath);
  await unlink(lockPath).catch(() => {});
}

/** The pid a lock file names, null when it names none, 'missing' when there is no such file. */
async function pidIn(file: string): Promise<number | null | 'missing'> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'missing';
    text = '';
  }
  const pid = Number.parseInt(text, 10);
  return Number.isInteger(pid) && pid > 0 ? pid : null;
}

/**
 * Takes the lock file; returns null when taken, else the pid of the live process holding it.
 *
 * A lock whose process is gone (a crash) is taken over, and only by one opener at a time:
 * the one that creates `LOCK.takeover` reads the lock again under it and removes it only if
 * it still names the same dead process. Two openers that both found the lock stale used to
 * both remove it, the second removing the lock the first had just taken, and both opened the
 * data directory (a review helper, 2026-11-27). Written by hand: Node has no flock, and the
 * lock libraries decide staleness by a file's age, which a service holding the database for
 * months does not fit.
 */
async function acquireLock(lockPath: string): Promise<number | null> {
  const takeover = `${lockPath}.takeover`;
  for (let attempt = 0; attempt < 100; attempt++) {
    // the pid is never seen missing from the lock (an opener reading an empty lock took it for stale)
    if (createWhole(lockPath, String(process.pid))) {
      locksHeld.add(lockPath);
      return null;
    }
    const pid = await pidIn(lockPath);
    // gone meanwhile (given back, or removed by a takeover): try to create it again. Taken for a
    // lock naming nobody, a lock found missing again under the takeover was removed, though
    // another opener had created its own between that read and the unlink: two writers (seen
    // on a busy machine)
    if (pid === 'missing') continue;
    if (pid !== null && !isStale(pid, lockPath)) return pid;
    if (!createWhole(takeover, String(process.pid))) {
      // another opener is taking it over; one that died doing so leaves a takeover to remove
      // (this process holds a takeover only within one turn of this loop: its own pid there is left over too)
      const taker = await pidIn(takeover);
      if (taker === null || taker === process.pid || (taker !== 'missing' && !isAlive(taker))) await unlink(takeover).catch(() => {});
      await sleep(20);
      continue;
    }
    try {
      if ((await pidIn(lockPath)) === pid) await unlink(lockPath).catch(() => {});
    } finally {
      await unlink(takeover).catch(() => {});
    }
  }
  throw new Error(`Could not take the lock ${lockPath}`);
}

/**
 * Whether a lock naming `pid` is left over: its process is gone, or it names this very process
 * without this process having taken it (an earlier life of the same pid: a container's pid 1
 * killed with SIGKILL and started again).
 */
function isStale(pid: number, lockPath: string): boolean {
  return (pid === process.pid && !locksHeld.has(lockPath)) || !isAlive(pid);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
