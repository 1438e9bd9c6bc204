import { chmod, lstat, mkdir, readdir } from 'node:fs/promises';
import { isMainThread } from 'node:worker_threads';
import path from 'node:path';

/**
 * DATA_DIR holds the embedded database (its catalog: pg_authid, pg_proc, every row), the
 * development signing and session keys, the demo's credentials and the mail a development
 * instance writes instead of sending (reset links): for this service's user only. Directories
 * are 0700 and files 0600 (owner bits as they were, group and other bits off), whatever the
 * umask the process was started with.
 */

/** The umask of the service and the command line: what they create is their user's alone. */
export const PRIVATE_UMASK = 0o077;

/**
 * Sets the process umask to PRIVATE_UMASK and returns the one it had. PGlite writes its files
 * through Node's fs (NODEFS) with the default modes, 0666 and 0777 less the umask, as a server
 * socket is made: the umask is what makes them private, and it stays set for the process, as
 * PGlite goes on creating files (relations, WAL) while it runs. Worker threads cannot set a
 * umask (Node refuses): there it is left as it is, and `tightenPrivateDir` still closes what
 * exists at start.
 */
export function usePrivateUmask(): number | undefined {
  if (!isMainThread) return undefined;
  return process.umask(PRIVATE_UMASK);
}

/** What `tightenPrivateDir` could not tighten (files of another user, say), for a warning. */
export interface TightenResult {
  notTightened: string[];
}

/**
 * Creates `dir` (and its parents) 0700 when `create`, then takes the group and other bits off
 * it and off everything under it: a data directory an older version (or a looser umask) made
 * 0755 with 0644 or 0666 files is closed at the next start. Symbolic links are not followed.
 * Entries that vanish meanwhile are passed over; ones this user may not change are returned.
 * A missing `dir` without `create` is nothing to do. Written by hand: a walk and a chmod, which
 * no well-kept package does without pulling in a glob engine.
 */
export async function tightenPrivateDir(dir: string, options: { create: boolean }): Promise<TightenResult> {
  const root = path.resolve(dir);
  if (options.create) await mkdir(root, { recursive: true, mode: 0o700 });
  const notTightened: string[] = [];
  const tighten = async (file: string): Promise<void> => {
    let st;
    try {
      st = await lstat(file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    if (st.isSymbolicLink()) return;
    const mode = st.mode & 0o7777;
    const wanted = st.isDirectory() ? 0o700 : mode & ~0o077;
    if (mode !== wanted && (st.isDirectory() || (mode & 0o077) !== 0)) {
      try {
        await chmod(file, wanted);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') return;
        if (code === 'EPERM' || code === 'EACCES') notTightened.push(file);
        else throw err;
      }
    }
    if (st.isDirectory()) {
      const entries = await readdir(file).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') return [] as string[];
        throw err;
      });
      for (const entry of entries) await tighten(path.join(file, entry));
    }
  };
  const exists = await lstat(root).then(() => true, () => false);
  if (exists) await tighten(root);
  return { notTightened };
}
