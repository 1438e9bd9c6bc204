import { defineConfig } from 'vitest/config';

/**
 * The test suite: every test/**\/*.test.ts, on the embedded database (PGlite in memory) or,
 * when TEST_DATABASE_URL is set, on a fresh PostgreSQL database per file.
 */
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    env: { NODE_ENV: 'test' },
    // Two worker processes (two cores: more files at once only queue behind each other and
    // behind PostgreSQL), each running its files one after another without a fresh module
    // graph per file: the app, PGlite's WebAssembly and a migrated template database
    // (test/helpers/db.ts) are built once per worker instead of once per file. Every test
    // file still builds its own app on its own database.
    pool: 'forks',
    isolate: false,
    maxWorkers: 2,
    // Limits for a busy 2-core machine; the slowest browser tests take ~15 s on a quiet one.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    teardownTimeout: 20_000,
    coverage: {
      provider: 'v8',
      include: ['src/**'],
      reporter: ['text-summary', 'text'],
    },
  },
});
