#!/usr/bin/env node
// Runs every test/**/*.test.ts with Node's test runner (TypeScript through tsx).
// Arguments narrow the run: `npm test -- test/sso` runs the files under test/sso.
// TEST_DATABASE_URL set: the tests run on that PostgreSQL (each file in a fresh database);
// unset: on the embedded database (PGlite).
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';

function collect(target) {
  if (statSync(target).isFile()) return [target];
  return readdirSync(target, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(target, e.name);
    if (e.isDirectory()) return e.name === 'helpers' ? [] : collect(p);
    return e.name.endsWith('.test.ts') ? [p] : [];
  });
}

const targets = process.argv.slice(2);
const files = (targets.length ? targets : ['test']).flatMap(collect).sort();
if (files.length === 0) {
  console.error('no test files found');
  process.exit(1);
}
console.log(`running ${files.length} test files on ${process.env.TEST_DATABASE_URL ? 'PostgreSQL' : 'the embedded database'}`);
const result = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', `--test-concurrency=${process.env.TEST_CONCURRENCY ?? 2}`, '--test-timeout=120000', ...files],
  { stdio: 'inherit', env: { ...process.env, NODE_ENV: 'test' } },
);
process.exit(result.status ?? 1);
