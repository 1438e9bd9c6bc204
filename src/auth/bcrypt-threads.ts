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

/** How much lower than the rest of the process bcrypt's threads run (nice +10: about a tenth of a core's weight). */
export const BCRYPT_NICE = 10;

type Job = { op: 'hash'; data: string; cost: number } | { op: 'compare'; data: string; hash: string };

const THREAD_CODE = `
const { parentPort, workerData } = require('node:worker_threads');
const bcrypt = require(workerData.bcrypt);
let tid = null;
try {
  tid = Number(require('node:fs').readlinkSync('/proc/thread-self').split('/').pop());
  if (workerData.nice > 0) require('node:os').setPriority(tid, workerData.nice);
} catch {}
parentPort.on('message', (job) => {
  try {
    parentPort.postMessage({ value: job.op === 'hash' ? bcrypt.hashSync(job.data, job.cost) : bcrypt.compareSync(job.data, job.hash) });
  } catch (err) {
    parentPort.postMessage({ error: String((err && err.message) || err) });
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
}

/**
 * A pool of `size` bcrypt threads, started when first needed. At most `size` operations run at
 * once; the others wait their turn, in order. An idle thread does not keep the process alive.
 */
export function createBcryptThreads(size: number, nice = BCRYPT_NICE) {
  const bcryptPath = createRequire(import.meta.url).resolve('bcrypt');
  const threads = new Set<Thread>();
  const idle: Thread[] = [];
  const waiting: Array<{ job: Job } & Running> = [];
  let busy = 0;

  function start(): Thread {
    const thread: Thread = { worker: new Worker(THREAD_CODE, { eval: true, workerData: { bcrypt: bcryptPath, nice }, stdout: false }), running: null };
    threads.add(thread);
    thread.worker.on('message', (message: { value?: unknown; error?: string }) => {
      const running = thread.running;
      thread.running = null;
      finished(thread);
      if (message.error !== undefined) running?.reject(new Error(`bcrypt: ${message.error}`));
      else running?.resolve(message.value);
    });
    thread.worker.on('error', () => {}); // an exit follows, and settles the operation
    thread.worker.on('exit', () => {
      threads.delete(thread);
      const at = idle.indexOf(thread);
      if (at >= 0) idle.splice(at, 1);
      const running = thread.running;
      thread.running = null;
      if (running) {
        busy--;
        running.reject(new Error('bcrypt thread exited'));
        next();
      }
    });
    return thread;
  }

  function dispatch(thread: Thread, item: { job: Job } & Running): void {
    busy++;
    thread.running = item;
    thread.worker.ref(); // a running operation keeps the process alive (an admin command waiting on a hash)
    thread.worker.postMessage(item.job);
  }

  function finished(thread: Thread): void {
    busy--;
    thread.worker.unref();
    idle.push(thread);
    next();
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
    /** Stops every thread; running operations fail, later ones start new threads. */
    async terminate(): Promise<void> {
      await Promise.all([...threads].map((t) => t.worker.terminate()));
    },
  };
}

export type BcryptThreads = ReturnType<typeof createBcryptThreads>;
