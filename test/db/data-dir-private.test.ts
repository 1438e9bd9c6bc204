import { chmod, lstat, mkdir, mkdtemp, readdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { tightenPrivateDir } from '../../src/config/private-dir.ts';
import { TEST_ENV } from '../helpers/app.ts';
import { request } from '../helpers/http.ts';
import { startServerProcess } from '../helpers/processes.ts';

const gone = (err: unknown) => (err as NodeJS.ErrnoException).code === 'ENOENT';

/**
 * Every entry under `dir` (itself included) with its permission bits, symbolic links left out.
 * The service runs meanwhile: an entry removed between the listing and its lstat (a temporary
 * file renamed into place) is left out, as it is no longer there to be open to anyone.
 */
async function modesUnder(dir: string): Promise<Array<{ file: string; mode: number; kind: string }>> {
  const st = await lstat(dir).catch((err: unknown) => (gone(err) ? null : Promise.reject(err)));
  if (!st || st.isSymbolicLink()) return [];
  const kind = st.isDirectory() ? 'dir' : st.isSocket() ? 'socket' : 'file';
  const own = [{ file: dir, mode: st.mode & 0o7777, kind }];
  if (!st.isDirectory()) return own;
  const names = await readdir(dir).catch((err: unknown) => (gone(err) ? [] : Promise.reject(err)));
  const children = await Promise.all(names.map((e) => modesUnder(path.join(dir, e))));
  return [...own, ...children.flat()];
}

/** Resolves once `file` exists (the service writes it after it started answering). */
async function waitForFile(file: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (await lstat(file).then(() => true, () => false)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${file} was not written within 30 s`);
}

const open = (entries: Awaited<ReturnType<typeof modesUnder>>) =>
  entries.filter((e) => (e.mode & 0o077) !== 0).map((e) => `${e.file} ${e.mode.toString(8)}`);

describe('DATA_DIR is the service user\'s alone', () => {
  it('after a start on the embedded database under umask 000, DATA_DIR is 0700 and nothing under it is open to group or others, an older looser tree included', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-priv-'));
    // as an older version (or umask 000) left it: the directory 0777, mail 0666 in a 0777 folder
    await mkdir(path.join(dataDir, 'mail'));
    await writeFile(path.join(dataDir, 'mail', 'old-reset.eml'), 'Subject: Reset your password\n');
    await chmod(path.join(dataDir, 'mail', 'old-reset.eml'), 0o666);
    await chmod(path.join(dataDir, 'mail'), 0o777);
    await chmod(dataDir, 0o777);
    const before = process.umask(0); // the child starts with umask 000
    let server: Awaited<ReturnType<typeof startServerProcess>>;
    try {
      server = await startServerProcess({ ...TEST_ENV, DATABASE_URL: '', DATA_DIR: dataDir, NODE_ENV: 'development', LOG_LEVEL: 'info' });
    } finally {
      process.umask(before);
    }
    try {
      // a request that writes (a failed sign-in) and the demo seeding (its credentials file is
      // its last write, renamed into place from a temporary file) have run their course
      expect((await request(`${server.url}/api/auth/login`, { body: { login: 'nobody', password: 'wrong password' } })).status).toBe(401);
      await waitForFile(path.join(dataDir, 'demo-client.json'));
      const entries = await modesUnder(dataDir);
      expect(entries[0]!.mode.toString(8), 'DATA_DIR').toBe('700');
      expect(entries.some((e) => e.kind === 'socket'), 'the socket is there').toBe(true);
      expect(entries.filter((e) => e.file.includes(`${path.sep}pgdata${path.sep}`)).length, 'the database files').toBeGreaterThan(100);
      expect(open(entries), 'group- or world-readable or writable').toStrictEqual([]);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });

  it('tightenPrivateDir creates the directory 0700 and takes group and other bits off, keeping the owner\'s', async () => {
    const parent = await mkdtemp(path.join(os.tmpdir(), 'auth-tighten-'));
    const dir = path.join(parent, 'data');
    expect(await tightenPrivateDir(dir, { create: false })).toStrictEqual({ notTightened: [] });
    await expect(lstat(dir), 'nothing made without create').rejects.toThrow(/ENOENT/);
    await tightenPrivateDir(dir, { create: true });
    await mkdir(path.join(dir, 'sub'));
    await writeFile(path.join(dir, 'sub', 'run'), '#!/bin/sh\n');
    await chmod(path.join(dir, 'sub', 'run'), 0o775);
    await writeFile(path.join(dir, 'key'), 'k');
    await chmod(path.join(dir, 'key'), 0o644);
    await chmod(path.join(dir, 'sub'), 0o755);
    await tightenPrivateDir(dir, { create: false });
    const modes = Object.fromEntries((await modesUnder(dir)).map((e) => [path.relative(dir, e.file), e.mode.toString(8)]));
    expect(modes).toStrictEqual({ '': '700', sub: '700', 'sub/run': '700', key: '600' });
  });
});
