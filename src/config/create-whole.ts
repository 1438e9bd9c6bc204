import { randomBytes } from 'node:crypto';
import { linkSync, rmSync, writeFileSync } from 'node:fs';

/**
 * Creates `file` holding `content` unless that name exists: true when it did, false (nothing
 * written) when the name was taken. Another process never sees the file empty or partial: the
 * content is written under a temporary name and hard-linked into place (a link fails when the
 * name exists). On a file system without hard links (FAT, many network and container mounts)
 * the name is created with flag wx and then written, as before. Used for the development key
 * files (src/config/key-file.ts) and the embedded database's lock (src/db/open.ts), whose
 * readers took an empty file for a missing key or a dead holder. Written by hand: Node has no
 * call that creates a file exclusively with its content, and no package does just this.
 */
export function createWhole(file: string, content: string, mode?: number): boolean {
  const taken = (err: unknown) => (err as NodeJS.ErrnoException).code === 'EEXIST';
  const temp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  writeFileSync(temp, content, { mode });
  try {
    linkSync(temp, file);
    return true;
  } catch (err) {
    if (taken(err)) return false;
  } finally {
    rmSync(temp, { force: true });
  }
  try {
    writeFileSync(file, content, { flag: 'wx', mode });
    return true;
  } catch (err) {
    if (taken(err)) return false;
    throw err;
  }
}
