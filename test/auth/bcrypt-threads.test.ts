import { existsSync, readdirSync, readFileSync } from 'node:fs';
import bcrypt from 'bcrypt';
import { afterEach, describe, expect, it } from 'vitest';
import { BCRYPT_NICE, createBcryptThreads, type BcryptThreads } from '../../src/auth/bcrypt-threads.ts';

/** The nice value of every thread of this process but the main one (Linux: field 19 of /proc/self/task/TID/stat). */
function otherThreadsNice(): number[] {
  return readdirSync('/proc/self/task')
    .filter((tid) => Number(tid) !== process.pid)
    .flatMap((tid) => {
      try {
        const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
        return [Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16])];
      } catch {
        return []; // the thread ended meanwhile
      }
    });
}

describe('bcrypt threads', () => {
  let threads: BcryptThreads | undefined;
  afterEach(async () => {
    await threads?.terminate();
    threads = undefined;
  });

  it.runIf(existsSync('/proc/thread-self'))('hash on threads whose priority is below the event loop\'s', async () => {
    // other files in this process may have started the service's own bcrypt threads
    const loweredBefore = otherThreadsNice().filter((n) => n === BCRYPT_NICE).length;
    threads = createBcryptThreads(2);
    const hashes = [threads.hash('password', 4), threads.hash('password', 4)];
    expect(await Promise.all(hashes.map((h) => h.then((hash) => bcrypt.compare('password', hash))))).toStrictEqual([true, true]);
    expect(otherThreadsNice().filter((n) => n === BCRYPT_NICE), 'a lowered thread for each operation that ran at once').toHaveLength(loweredBefore + 2);
    expect(readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8').split(') ')[1].split(' ')[16], 'the main thread keeps its priority').toBe('0');
  });

  it('runs at most its size at once, in order, and answers each with its own result', async () => {
    threads = createBcryptThreads(2);
    const hash = await bcrypt.hash('right', 4);
    const compares = ['right', 'wrong', 'right', 'wrong', 'right'].map((p) => threads!.compare(p, hash));
    expect(threads.busy(), 'two run, three wait').toBe(2);
    expect(await Promise.all(compares)).toStrictEqual([true, false, true, false, true]);
    expect(threads.busy()).toBe(0);
  });

  it('fails the operations of a thread that exits, and starts a new thread for the next', async () => {
    threads = createBcryptThreads(1);
    const running = threads.hash('password', 10);
    const queued = threads.hash('password', 4);
    await threads.terminate();
    await expect(running).rejects.toThrow('bcrypt thread exited');
    expect(await bcrypt.compare('password', await queued), 'the waiting operation ran on a new thread').toBe(true);
    expect(await threads.compare('password', await threads.hash('password', 4))).toBe(true);
    expect(threads.busy()).toBe(0);
  });

  it('rejects an operation bcrypt refuses, and keeps serving', async () => {
    threads = createBcryptThreads(1);
    await expect(threads.hash('password', 99)).rejects.toThrow(/^bcrypt: /);
    expect(await threads.compare('password', await threads.hash('password', 4))).toBe(true);
  });
});
