import { existsSync, readFileSync } from 'node:fs';
import bcrypt from 'bcrypt';
import { afterEach, describe, expect, it } from 'vitest';
import { BCRYPT_NICE, createBcryptThreads, type BcryptThreads } from '../../src/auth/bcrypt-threads.ts';

/** A thread's nice value (Linux: field 19 of /proc/self/task/TID/stat). */
function niceOf(tid: number): number {
  const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
}

describe('bcrypt threads', () => {
  let threads: BcryptThreads | undefined;
  afterEach(async () => {
    await threads?.terminate();
    threads = undefined;
  });

  it.runIf(existsSync('/proc/thread-self'))('hash on threads whose priority is below the event loop\'s', async () => {
    threads = createBcryptThreads(2);
    const hashes = [threads.hash('password', 4), threads.hash('password', 4)];
    expect(await Promise.all(hashes.map((h) => h.then((hash) => bcrypt.compare('password', hash))))).toStrictEqual([true, true]);
    const ids = threads.threadIds();
    expect(ids, 'a thread for each operation that ran at once').toHaveLength(2);
    expect(ids).not.toContain(process.pid);
    const own = niceOf(process.pid); // relative to the process's own: started under `nice`, it stays below
    expect(ids.map(niceOf)).toStrictEqual(ids.map(() => Math.min(19, own + BCRYPT_NICE)));
  });

  it('ends a thread that has been idle, and starts one again for the next operation', async () => {
    threads = createBcryptThreads(2, BCRYPT_NICE, 50);
    // the threads that answered, read as each hash returns: on a busy machine the first thread
    // can have been idle 50 ms, and ended, before the second answers
    const answered = new Set<number>();
    const hashes = [threads.hash('password', 4), threads.hash('password', 4)];
    await Promise.all(hashes.map((h) => h.then(() => threads!.threadIds().forEach((id) => answered.add(id)))));
    expect(answered.size, 'a thread for each operation that ran at once').toBe(2);
    await expect.poll(() => threads!.threadIds(), { timeout: 10_000, interval: 25 }).toStrictEqual([]);
    expect(await threads.compare('password', await threads.hash('password', 4))).toBe(true);
  });

  it('keeps a thread that is given work before its idle time is out', async () => {
    threads = createBcryptThreads(1, BCRYPT_NICE, 60_000);
    await threads.hash('password', 4);
    const [first] = threads.threadIds();
    await threads.hash('password', 4);
    expect(threads.threadIds()).toStrictEqual([first]);
  });

  it('runs at most its size at once, in order, and answers each with its own result', async () => {
    threads = createBcryptThreads(2);
    const hash = await bcrypt.hash('right', 4);
    const compares = ['right', 'wrong', 'right', 'wrong', 'right'].map((p) => threads!.compare(p, hash));
    expect(threads.busy(), 'two run, three wait').toBe(2);
    expect(await Promise.all(compares)).toStrictEqual([true, false, true, false, true]);
    expect(threads.busy()).toBe(0);
  });

  it('fails the running and waiting operations when terminated, and starts new threads for later ones', async () => {
    threads = createBcryptThreads(1);
    expect(await threads.compare('password', await threads.hash('password', 4))).toBe(true);
    const running = expect(threads.hash('password', 10)).rejects.toThrow('bcrypt thread exited');
    const queued = expect(threads.hash('password', 4)).rejects.toThrow('bcrypt threads terminated');
    const stopped = threads.terminate();
    const later = threads.hash('password', 4); // not given to the thread being stopped
    await stopped;
    await running;
    await queued;
    expect(await bcrypt.compare('password', await later)).toBe(true);
    expect(threads.busy()).toBe(0);
  });

  it('fails an operation whose input cannot reach a thread alone, and keeps serving', async () => {
    threads = createBcryptThreads(1);
    const held = threads.hash('password', 4);
    // callers pass strings; a programming error must not wedge the pool or lose another operation
    const bad = threads.hash((() => 'x') as unknown as string, 4);
    await expect(bad).rejects.toThrow();
    expect(await bcrypt.compare('password', await held)).toBe(true);
    expect(threads.busy()).toBe(0);
    expect(await threads.compare('password', await threads.hash('password', 4))).toBe(true);
  });

  it('rejects an operation bcrypt refuses, and keeps serving', async () => {
    threads = createBcryptThreads(1);
    await expect(threads.hash('password', 99)).rejects.toThrow(/^bcrypt: /);
    expect(await threads.compare('password', await threads.hash('password', 4))).toBe(true);
  });
});
