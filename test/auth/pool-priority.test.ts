import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { POOL_PRIORITY, ROOT, startServerProcess } from '../helpers/processes.ts';
import { threadPoolSize } from '../../src/auth/passwords.ts';
import { prepareServerEnv } from '../ops/helpers/child-service.ts';

/**
 * In a process of its own (the pool's priority is set once, at start): the preload's account,
 * each thread's nice value (field 19 of /proc/self/task/TID/stat) and CPU time (14 + 15, in
 * clock ticks) before and after hashes through the service's own passwords module.
 */
const PROBE = `
const fs = require('node:fs');
function threads() {
  const out = {};
  for (const tid of fs.readdirSync('/proc/self/task')) {
    try {
      const stat = fs.readFileSync('/proc/self/task/' + tid + '/stat', 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out[tid] = { nice: Number(f[16]), cpu: Number(f[11]) + Number(f[12]) };
    } catch {}
  }
  return out;
}
(async () => {
  const passwords = await import('./src/auth/passwords.ts');
  const before = threads();
  await Promise.all(Array.from({ length: passwords.BCRYPT_CONCURRENCY * 2 }, () => passwords.hashPassword('password', Number(process.env.PROBE_COST))));
  console.log(JSON.stringify({ pid: process.pid, concurrency: passwords.BCRYPT_CONCURRENCY, priority: passwords.bcryptPriority(), before, after: threads() }));
})();
`;

interface Probe {
  pid: number;
  concurrency: number;
  priority: { lowered: boolean; nice: number; threads: number[] };
  before: Record<string, { nice: number; cpu: number }>;
  after: Record<string, { nice: number; cpu: number }>;
}

function probe(nodeFlags: string[], env: Record<string, string> = {}, cost = 11): Promise<Probe> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [...nodeFlags, '--import', 'tsx', '-e', PROBE], { cwd: ROOT, env: { ...process.env, ...env, PROBE_COST: String(cost) } }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(JSON.parse(stdout.trim().split('\n').at(-1)!) as Probe));
  });
}

/** The CPU time each thread spent between the two readings, by thread id. */
const spent = (p: Probe) => Object.fromEntries(Object.entries(p.after).map(([tid, t]) => [tid, t.cpu - (p.before[tid]?.cpu ?? 0)]));

describe.runIf(existsSync('/proc/thread-self'))("libuv's pool below the event loop (scripts/pool-priority.cjs)", () => {
  it('lowers every thread of the pool by 10 and none other, and bcrypt spends its time there', async () => {
    const p = await probe([POOL_PRIORITY]);
    expect(p.priority.lowered).toBe(true);
    expect(p.priority.nice).toBe(10);
    expect(p.priority.threads, "the pool's four threads").toHaveLength(4);
    const own = p.after[p.pid]!.nice; // relative to the process's: started under `nice`, it stays below
    for (const [tid, t] of Object.entries(p.after)) {
      expect(t.nice, `thread ${tid}`).toBe(p.priority.threads.includes(Number(tid)) ? Math.min(19, own + 10) : own);
    }
    const cpu = spent(p);
    const onPool = p.priority.threads.reduce((sum, tid) => sum + (cpu[tid] ?? 0), 0);
    const elsewhere = Object.entries(cpu).filter(([tid]) => Number(tid) !== p.pid && !p.priority.threads.includes(Number(tid))).reduce((sum, [, c]) => sum + c, 0);
    // six hashes at cost 11: over a second of CPU (100 ticks a second), nearly all of it on the pool
    expect(onPool, 'CPU time of the lowered threads, in ticks').toBeGreaterThan(20);
    expect(elsewhere, "the other threads' (V8's own) share").toBeLessThan(onPool / 4);
    const busyThreads = p.priority.threads.filter((tid) => (cpu[tid] ?? 0) > 0);
    expect(busyThreads.length, 'as many threads hashed at once as the concurrency allows, or more over time').toBeGreaterThanOrEqual(Math.min(2, p.concurrency));
  });

  it("follows the pool's size (UV_THREADPOOL_SIZE), leaving one thread for fs and dns", async () => {
    const p = await probe([POOL_PRIORITY], { UV_THREADPOOL_SIZE: '3' }, 4);
    expect(p.priority.threads).toHaveLength(3);
    expect(p.concurrency).toBe(2);
  });

  it('reads UV_THREADPOOL_SIZE as libuv does, whatever its spelling', async () => {
    // libuv's C atoi: "abc" and "" are 0, which it makes 1; " 3x" is 3
    for (const value of ['abc', '', '0', '2', ' 3x']) {
      const p = await probe([POOL_PRIORITY], { UV_THREADPOOL_SIZE: value }, 4);
      expect(p.priority.threads.length, `pool threads for "${value}"`).toBe(threadPoolSize(value, undefined));
      expect(p.concurrency, `bcrypt at once for "${value}"`).toBe(Math.max(1, p.priority.threads.length - 1));
    }
    expect(threadPoolSize(undefined, undefined), 'unset').toBe(4);
    expect(threadPoolSize('-3', undefined), "a negative number, unsigned in libuv's hands").toBe(1024);
    expect(threadPoolSize('5000', undefined)).toBe(1024);
  });

  it('touches no thread when the pool already ran (it cannot tell which are the pool), and says so', async () => {
    const p = await probe(['--require=./test/fixtures/pool-started.cjs', POOL_PRIORITY], {}, 4);
    expect(p.priority).toStrictEqual({ lowered: false, nice: 0, threads: [] });
    const own = p.after[p.pid]!.nice;
    expect(Object.values(p.after).map((t) => t.nice)).toStrictEqual(Object.values(p.after).map(() => own));
  });
});

describe.runIf(existsSync('/proc/thread-self'))('the server', () => {
  const WARNING = "bcrypt runs at the event loop's priority";

  it("warns at start when bcrypt would run at the event loop's priority", { timeout: 60_000 }, async () => {
    // said before the database opens: the process is stopped once it has said it
    const { env, drop } = await prepareServerEnv();
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      let out = '';
      const said = await new Promise<boolean>((resolve) => {
        const onData = (chunk: Buffer) => {
          out += chunk.toString();
          if (out.includes(WARNING)) resolve(true);
          else if (out.includes('auth service listening')) resolve(false);
        };
        child.stdout!.on('data', onData);
        child.stderr!.on('data', onData);
        child.once('exit', () => resolve(out.includes(WARNING)));
      });
      expect(said, out).toBe(true);
    } finally {
      if (child.exitCode === null) {
        child.kill('SIGKILL');
        await once(child, 'exit');
      }
      await drop();
    }
  });

  it('says nothing of the kind when started as npm start starts it', { timeout: 60_000 }, async () => {
    const { env, drop } = await prepareServerEnv();
    const server = await startServerProcess(env);
    try {
      expect(server.output()).not.toContain(WARNING);
    } finally {
      await server.stop();
      await drop();
    }
  });
});
