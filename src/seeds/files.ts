import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import type { SeedFile } from './apply.ts';
import { SeedError } from './errors.ts';

/**
 * The seed files at `paths` (relative to `cwd`), in the order given; a folder stands for its
 * *.sql files in name order (only *.sql: an example such as seeds/example.sql.sample is never
 * applied). With no path, the folder seeds/ (none when it does not exist). Each file is
 * reported by the path as given (a folder's files as folder/name).
 */
export async function readSeedFiles(cwd: string, paths: readonly string[]): Promise<SeedFile[]> {
  const names: string[] = [];
  for (const given of paths.length > 0 ? paths : ['seeds']) {
    const info = await stat(path.resolve(cwd, given)).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT' && paths.length === 0) return null; // no seeds/ folder: no seed files
      throw new SeedError(given, err.code === 'ENOENT' ? 'no such file' : err.message);
    });
    if (!info) continue;
    if (!info.isDirectory()) {
      names.push(given);
      continue;
    }
    const entries = await readdir(path.resolve(cwd, given));
    names.push(...entries.filter((f) => f.endsWith('.sql')).sort().map((f) => path.join(given, f)));
  }
  const files: SeedFile[] = [];
  for (const name of names) {
    const sql = await readFile(path.resolve(cwd, name), 'utf8').catch((err: NodeJS.ErrnoException) => {
      throw new SeedError(name, err.code === 'ENOENT' ? 'no such file' : err.message);
    });
    files.push({ name, sql });
  }
  return files;
}
