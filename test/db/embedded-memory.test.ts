import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/open.ts';
import type { Db } from '../../src/db/db.ts';

/** The embedded database's memory settings (docs/memory.md). */
describe('the embedded database on a data directory', () => {
  let dir: string | undefined;
  let db: Db | undefined;
  afterEach(async () => {
    await db?.close();
    db = undefined;
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('creates a new data directory whole, and runs with the configured shared_buffers', async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'embedded-memory-'));
    db = await openDatabase({ DATABASE_URL: undefined, DATA_DIR: dir, EMBEDDED_SHARED_BUFFERS: '8MB' }, { serve: false });
    expect((await db.query<{ shared_buffers: string }>('SHOW shared_buffers')).rows[0].shared_buffers).toBe('8MB');
    await db.query('CREATE TABLE kept (v int)');
    await db.query('INSERT INTO kept VALUES (42)');
    await db.close();
    expect(readdirSync(dir).filter((name) => name.includes('creating')), 'no temporary directory left').toStrictEqual([]);
    // opened again: the same database, and the default page cache
    db = await openDatabase({ DATABASE_URL: undefined, DATA_DIR: dir }, { serve: false });
    expect((await db.query<{ v: number }>('SELECT v FROM kept')).rows).toStrictEqual([{ v: 42 }]);
    expect((await db.query<{ shared_buffers: string }>('SHOW shared_buffers')).rows[0].shared_buffers).toBe('16MB');
  });

  it('runs the in-memory database with the default shared_buffers, not the 128MB of PGlite', async () => {
    const { openEmbedded } = await import('../../src/db/embedded.ts');
    ({ db } = await openEmbedded());
    expect((await db.query<{ shared_buffers: string }>('SHOW shared_buffers')).rows[0].shared_buffers).toBe('16MB');
  });
});
