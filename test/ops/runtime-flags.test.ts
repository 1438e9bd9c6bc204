import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { NODE_FLAGS, startFlags } from '../../bench/support.ts';

const root = new URL('../../', import.meta.url);
const read = (file: string) => readFileSync(new URL(file, root), 'utf8');

/**
 * The service runs with V8's young generation held to 4 MiB semi-spaces (docs/performance.md,
 * "Memory at rest and under load": V8's default lets them grow to 16 MiB under load and keeps
 * them, about 20-40 MB more resident, for 3-5% more throughput; 64 MiB kept 100 MB more).
 * libuv's pool, where bcrypt hashes, is lowered below the event loop by a preload
 * (scripts/pool-priority.cjs; test/auth/pool-priority.test.ts). `npm start`, the Docker image
 * and the benchmark must start it alike.
 */
describe('the node options the service runs with', () => {
  const start = JSON.parse(read('package.json')).scripts.start as string;

  it('npm start holds the young generation to 4 MiB semi-spaces and lowers the pool', () => {
    expect(startFlags(start)).toStrictEqual(['--max-semi-space-size=4', '--require=./scripts/pool-priority.cjs']);
    expect(start).toMatch(/ scripts\/launch\.mjs server$/);
  });

  it('the Docker image starts the compiled service with the same options', () => {
    const cmd = read('Dockerfile').split('\n').filter((line) => line.startsWith('CMD ')).at(-1)!;
    expect(JSON.parse(cmd.slice(4))).toStrictEqual(['node', ...startFlags(start), 'dist/server.js']);
  });

  it('the benchmark starts every process with them', () => {
    if (process.env.BENCH_NODE_FLAGS !== undefined) return; // overridden on purpose
    expect(NODE_FLAGS).toStrictEqual(startFlags(start));
    expect(startFlags('node scripts/launch.mjs server'), 'none given').toStrictEqual([]);
    expect(startFlags('tsx src/server.ts'), 'not node').toStrictEqual([]);
  });
});
