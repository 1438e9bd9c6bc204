import { existsSync } from 'node:fs';
import { mkdtemp, readdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runAdmin } from '../../src/cli/run.ts';
import { TEST_ENV } from '../helpers/app.ts';
import { captured } from '../helpers/cli.ts';

/**
 * `npm run admin -- client list` (a read-only command) in a shell without DATABASE_URL, in a
 * directory where no service keeps its data: it refuses, saying it changes nothing, and it does
 * change nothing (before, it had made DATA_DIR and a fresh embedded database cluster of some
 * 40 MB there, which the next `npm start` from that directory would use). Found by a review helper.
 */
describe('a read-only admin command on a DATA_DIR with no database', () => {
  it('changes nothing on disk', async () => {
    const dataDir = path.join(await mkdtemp(path.join(os.tmpdir(), 'review-g-ro-')), 'data');
    const r = await captured(runAdmin, ['client', 'list'], { env: { ...TEST_ENV, DATABASE_URL: '', DATA_DIR: dataDir } });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/there is no embedded database in .*this command only reads and changes nothing/);
    const left = existsSync(dataDir) ? await readdir(dataDir) : [];
    expect(left, `${dataDir} after a read-only command`).toStrictEqual([]);
  });
});
