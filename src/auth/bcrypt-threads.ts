import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * bcrypt on threads of its own, each at a lower scheduling priority than the rest of the process.
 *
 * bcrypt's own async functions run on libuv's pool, whose threads compete with the event loop
 * as equals: during a login storm on a two-core machine the event loop (token validation,
 * /healthz, every other request) then waits for a core behind seconds of hashing, and
 * /healthz's p99 reached 28 ms (docs/performance.md, "bcrypt at a lower priority"). Here each
 * thread raises its own nice value (BCRYPT_NICE): the kernel still gives bcrypt every cycle
 * nobody else wants, so logins lose nothing on an otherwise idle machine, but a waking event
 * loop, PostgreSQL or a probe gets the core at once.
 *
 * Written by hand rather than with a pool library (piscina, tinypool): each thread must lower
 * its own priority, which needs its thread id (Linux: setpriority on a thread id changes that
 * thread alone), and the threads run from a code string, so that they start the same way
 * under tsx (development) and compiled (production); those libraries load a worker file.
 * Where /proc/thread-self is missing (not Linux) the threads keep the normal priority.
 */

/** How much lower than the rest of the process bcrypt's threads run (nice +10 over the process's own: about a tenth of its weight). */
export const BCRYPT_NICE = 10;

type Job = { op: 'hash'; data: string; cost: number } | { op: 'compare'; data: string; hash: string };

const THREAD_CODE = `
const { parentPort, workerData } = require('node:worker_threads');
const bcrypt = require(workerData.bcrypt);
const os = require('node:os');
let tid = null;
try {
  tid = Number(require('node:fs').readlinkSync('/proc/thread-self').split('/').pop());
  // relative to the priority this thread started with (the process's): nice is absolute
  if (workerData.nice > 0) os.setPriority(tid, Math.min(19, os.getPriority(tid) + workerData.nice));
} catch {}
parentPort.on('message', (job) => {
  try {
    parentPort.postMessage({ tid, value: job.op === 'hash' ? bcrypt.hashSync(job.data, job.cost) : bcrypt.compareSync(job.data, job.hash) });
  } catch (err) {
    parentPort.postMessage({ tid, error: String((err && err.message) || err) });
  }
});
`;

interface Running {
  resolve(value: unknown): void;
  reject(err: Error): void;
}

interface Thread {
  worker: Worker;
  running: Running | null;
  /** The operating system's id of the thread, once it has answered (Linux). */
  tid: number | null;
  /** Why the thread failed, if it did (bcrypt could not be loaded, ...). */
  error: unknown;
  /** Ends the thread once it has been idle for `idleMs`. */
  idleTimer: NodeJS.Timeout | null;
}

/**
 * How long a thread may stay idle before it ends. Each thread is a V8 isolate of its own
 * (about 10 MiB resident): after a burst of sign-ins the threads it started would otherwise
 * stay for the life of the process. The next operation starts one again.
 */
export const BCRYPT_THREAD_IDLE_MS = 30_000;

/**
 * A pool of `size` bcrypt threads, started when first needed. At most `size` operations run at
 * once; the others wait their turn, in order. An idle thread does not keep the process alive.
 */
export function createBcryptThreads(size: number, nice = BCRYPT_NICE, idleMs = BCRYPT_THREAD_IDLE_MS) {
  const bcryptPath = createRequire(import.meta.url).resolve('bcrypt');
  const threads = new Set<Thread>();
  const idle: Thread[] = [];
  const waiting: Array<{ job: Job } & Running> = [];
  let busy = 0;

  function start(): Thread {
    const worker = new Worker(THREAD_CODE, { eval: true, workerData: { bcrypt: bcryptPath, nice }, stdout: false });
    const thread: Thread = { worker, running: null, tid: null, error: undefined, idleTimer: null };
    threads.add(thread);
    worker.on('message', (message: { tid: number | null; value?: unknown; error?: string }) => {
      thread.tid = message.tid;
      const running = release(thread);
      if (!running) return; // terminated meanwhile: its operation has been failed already
      if (message.error !== undefined) running.reject(new Error(`bcrypt: ${message.error}`));
      else running.resolve(message.value);
      next();
    });
    worker.on('error', (err) => {
      thread.error = err; // the exit that follows settles the operation
    });
    worker.on('exit', () => {
      retire(thread);
      const running = release(thread);
      if (running) {
        running.reject(new Error('bcrypt thread exited', { cause: thread.error }));
        next();
      }
    });
    return thread;
  }

  /** Ends the thread's operation, if it has one, and returns it; the thread is idle again unless retired. */
  function release(thread: Thread): Running | null {
    const running = thread.running;
    if (!running) return null;
    thread.running = null;
    busy--;
    thread.worker.unref();
    if (threads.has(thread)) {
      idle.push(thread);
      thread.idleTimer = setTimeout(() => {
        retire(thread);
        void thread.worker.terminate();
      }, idleMs).unref();
    }
    return running;
  }

  /** Takes a thread out of the pool: nothing more is given to it. */
  function retire(thread: Thread): void {
    clearIdleTimer(thread);
    threads.delete(thread);
    const at = idle.indexOf(thread);
    if (at >= 0) idle.splice(at, 1);
  }

  function clearIdleTimer(thread: Thread): void {
    if (thread.idleTimer) clearTimeout(thread.idleTimer);
    thread.idleTimer = null;
  }

  function dispatch(thread: Thread, item: { job: Job } & Running): void {
    clearIdleTimer(thread);
    busy++;
    thread.running = item;
    thread.worker.ref(); // a running operation keeps the process alive (an admin command waiting on a hash)
    try {
      thread.worker.postMessage(item.job);
    } catch (err) {
      // the job could not be copied to the thread (not strings): it fails alone, the thread stays
      release(thread);
      item.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  function next(): void {
    while (waiting.length > 0 && busy < size) {
      const thread = idle.pop() ?? start();
      dispatch(thread, waiting.shift()!);
    }
  }

  function run<T>(job: Job): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      waiting.push({ job, resolve: resolve as (value: unknown) => void, reject });
      next();
    });
  }

  return {
    hash: (data: string, cost: number) => run<string>({ op: 'hash', data, cost }),
    compare: (data: string, hash: string) => run<boolean>({ op: 'compare', data, hash }),
    /** Operations running now (at most `size`). */
    busy: () => busy,
    /** The operating system's ids of the threads that have answered (Linux; for diagnostics and tests). */
    threadIds: (): number[] => [...threads].flatMap((t) => (t.tid === null ? [] : [t.tid])),
    /** Stops every thread: running and waiting operations fail; later ones start new threads. */
    async terminate(): Promise<void> {
      const stopping = [...threads];
      stopping.forEach(retire);
      for (const item of waiting.splice(0)) item.reject(new Error('bcrypt threads terminated'));
      await Promise.all(stopping.map((t) => t.worker.terminate()));
    },
  };
}

export type BcryptThreads = ReturnType<typeof createBcryptThreads>;
