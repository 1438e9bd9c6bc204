import { defineConfig } from 'vitest/config';

/**
 * The test suite: every test/**\/*.test.ts, on the embedded database (PGlite in memory) or,
 * when TEST_DATABASE_URL is set, on a fresh PostgreSQL database per file.
 */
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    env: { NODE_ENV: 'test' },
    // Each file gets its own process: PGlite and the service's timers stay in it.
    pool: 'forks',
    // Two cores: more files at once only queue behind each other (and behind PostgreSQL).
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    teardownTimeout: 20_000,
    coverage: {
      provider: 'v8',
      include: ['src/**'],
      reporter: ['text-summary', 'text'],
    },
  },
});
