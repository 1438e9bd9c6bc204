import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';

/**
 * src/config/key-file.ts (6593c92) keeps a branch for "a file system without hard links"
 * (linkSync fails with EPERM/ENOTSUP: FAT/exFAT, many network and container bind mounts):
 * it creates the name with flag wx. A file there that holds no key (the empty or cut-short
 * file the module exists to replace) makes that wx fail with EEXIST, which is thrown: the
 * service cannot start, where on any other file system the file is replaced.
 */
vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs')>();
  const linkSync = () => {
    throw Object.assign(new Error('EPERM: operation not permitted, link'), { code: 'EPERM' });
  };
  return { ...fs, default: { ...fs, linkSync }, linkSync };
});

const { developmentKey } = await import('../../src/config/key-file.ts');

describe('the development key file on a file system without hard links', () => {
  it('replaces an empty key file (as it does elsewhere) instead of failing the start', async () => {
    const file = path.join(await mkdtemp(path.join(os.tmpdir(), 'auth-nolink-')), 'session.key');
    await writeFile(file, '');
    let key: string | undefined;
    let thrown: unknown;
    try {
      key = developmentKey(file);
    } catch (err) {
      thrown = err;
    }
    expect(thrown, 'the start fails').toBeUndefined();
    expect(key).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect((await readFile(file, 'utf8')).trim()).toBe(key);
  });
});
