import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtemp, readdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { embeddedPaths } from '../../src/db/open.ts';
import { onPostgres } from '../helpers/db.ts';
import { ROOT } from '../helpers/processes.ts';

const CHILD = path.join(ROOT, 'test/db/fixtures/lock-race-child.mjs');

/** A process that opens a data directory at the moment it is told to, and answers how. */
function opener(): { child: ChildProcessWithoutNullStreams; next(): Promise<string> } {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD], { cwd: ROOT });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  return { child, next: async () => String((await lines.next()).value) };
}

/**
 * A crash leaves embedded.lock naming a dead process. Two openers starting at once both found
 * it stale and both removed it, the second removing the lock the first had just taken, and
 * both opened the data directory: two writers (a review helper found it, 3 tries in 16).
 */
describe.skipIf(onPostgres && 'embedded only')('the embedded database\'s lock left by a crash', () => {
  const openers = [opener(), opener()];
  beforeAll(async () => {
    for (const o of openers) expect(await o.next()).toBe('ready');
  }, 60_000);
  afterAll(() => {
    for (const o of openers) o.child.kill();
  });

  it('is taken over by one of two processes starting at once; the other finds it held', async () => {
    const outcomes: string[] = [];
    for (let i = 0; i < 40; i++) {
      const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-stale-lock-'));
      await writeFile(embeddedPaths(dataDir).lock, '999999'); // a service killed with SIGKILL
      const at = Date.now() + 30;
      for (const o of openers) o.child.stdin.write(`${dataDir} ${at}\n`);
      const answers = await Promise.all(openers.map((o) => o.next()));
      const spans = answers.filter((a) => a.startsWith('embedded ')).map((a) => a.split(' ').slice(1).map(Number));
      // both opened it themselves: fine one after the other (a slow start), never at once (one
      // can open in the very millisecond the other let go: spans that only touch do not overlap)
      const overlapping = spans.length === 2 && spans[0][0] < spans[1][1] && spans[1][0] < spans[0][1];
      outcomes.push(overlapping ? `two at once (${answers.join(' / ')})` : answers.map((a) => a.split(' ')[0]).sort().join('+'));
      expect((await readdir(dataDir)).filter((f) => f.includes('lock')), 'nothing of the lock left once both are done').toStrictEqual([]);
    }
    expect(outcomes.filter((o) => o.startsWith('two at once')), 'two writers on one data directory').toStrictEqual([]);
    expect(outcomes.filter((o) => o !== 'busy+embedded' && o !== 'embedded+embedded'), 'no errors').toStrictEqual([]);
  }, 60_000);
});
