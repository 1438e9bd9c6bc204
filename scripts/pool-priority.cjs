'use strict';
// Lowers the scheduling priority of libuv's thread pool, where bcrypt hashes: loaded with
// `node --require=./scripts/pool-priority.cjs` (npm start, the Docker image, the benches) before
// anything else runs.
//
// bcrypt's asynchronous functions run on libuv's pool, whose threads would compete with the
// event loop as equals: during a login storm on a two-core machine the event loop (token
// validation, /healthz, every other request) would wait for a core behind seconds of hashing.
// At nice +10 (about a tenth of the event loop's weight) the kernel still gives them every
// cycle nobody else wants, so sign-ins lose nothing on an otherwise idle machine, while a
// waking event loop, PostgreSQL or a probe gets a core at once (docs/performance.md, "Logins
// and the event loop").
//
// Written by hand: no library renices libuv's pool. libuv starts the pool's threads on its first
// use, all of them before the call that needed them returns; an ES module is too late (Node's
// loader has used the pool before a module's first line), a CommonJS preload is not. So the
// threads that appear across one asynchronous fs call are exactly the pool's, and each is
// lowered by its thread id (Linux: setpriority on a thread id changes that thread alone).
// Where /proc is missing (not Linux) or the pool already ran, nothing changes, and the service
// says so at start (src/auth/passwords.ts, bcryptPriority).

const fs = require('node:fs');
const os = require('node:os');

/** How much lower than the process the pool runs: nice +10, relative (nice is absolute). */
const NICE = 10;

function threadIds() {
  try {
    return new Set(fs.readdirSync('/proc/self/task'));
  } catch {
    return null;
  }
}

const before = threadIds();
fs.stat(__filename, () => {}); // starts libuv's pool, every thread of it, before it returns
const after = threadIds();
const started = before && after ? [...after].filter((tid) => !before.has(tid)).map(Number) : [];
// the threads born inside that call can only be the pool's (as many as libuv read from
// UV_THREADPOOL_SIZE); none means the pool was already running, and then which threads are its
// own is unknown: none is touched
const lowered = [];
for (const tid of started) {
  try {
    os.setPriority(tid, Math.min(19, os.getPriority(tid) + NICE));
    lowered.push(tid);
  } catch {
    // the thread is gone, or the system refuses: it keeps the process's priority
  }
}

/**
 * Read by src/auth/passwords.ts: which of the pool's threads were lowered and by how much, and
 * the pool's size as libuv made it (0 when the pool was already running).
 */
globalThis[Symbol.for('auth-service.pool-priority')] = Object.freeze({ nice: NICE, threads: Object.freeze(lowered), size: started.length });
