import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { NODE_FLAGS, startFlags } from '../../bench/support.ts';

const root = new URL('../../', import.meta.url);
const read = (file: string) => readFileSync(new URL(file, root), 'utf8');

/**
 * The service runs with V8's default young generation (docs/performance.md, "Memory at rest and
 * under load": 64 MiB semi-spaces kept about 35 MiB more resident at rest, 100 MiB after load).
 * `npm start`, the Docker image and the benchmark must start it alike.
 */
describe('the node options the service runs with', () => {
  const start = JSON.parse(read('package.json')).scripts.start as string;

  it('npm start gives the service no semi-space flag that would keep a large young generation resident', () => {
    expect(startFlags(start)).toStrictEqual([]);
    expect(start).not.toMatch(/semi-space/);
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
