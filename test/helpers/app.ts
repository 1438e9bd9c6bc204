import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { type Config, loadConfig } from '../../src/config.ts';
import type { Db } from '../../src/db/db.ts';
import { migrate } from '../../src/db/migrate.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { createTestDatabase } from './db.ts';
import { client } from './http.ts';

export interface TestApp extends RunningService {
  db: Db;
  config: Config;
  /** Connection string of the test database (PostgreSQL runs only). */
  databaseUrl?: string;
  http: ReturnType<typeof client>;
  close(): Promise<void>;
}

/** Settings for tests: fast bcrypt, generous limits (tests of limits lower them), quiet logs. */
export const TEST_ENV: Record<string, string> = {
  NODE_ENV: 'test',
  PORT: '0',
  HOST: '127.0.0.1',
  BCRYPT_COST: '4',
  JWT_SECRET: 'test-secret-test-secret-test-secret-0123456789',
  SESSION_SECRET: 'session-secret-session-secret-session-0123456789',
  RATE_LIMIT_LOGIN_PER_MIN: '100000',
  RATE_LIMIT_VALIDATE_PER_MIN: '100000',
  RATE_LIMIT_USER_PER_MIN: '100000',
  WEBHOOK_ALLOW_PRIVATE: 'true',
  LOG_LEVEL: 'silent',
};

/**
 * Starts the real service over HTTP on a fresh database (or on `options.db`, to run a
 * second instance against the same one). `env` overrides configuration keys.
 */
export async function startTestApp(env: Record<string, string> = {}, options: { db?: Db; databaseUrl?: string } = {}): Promise<TestApp> {
  const owned = options.db ? undefined : await createTestDatabase();
  const db = options.db ?? owned!.db;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-test-'));
  const config = loadConfig({ ...TEST_ENV, DATA_DIR: dataDir, ...env });
  const logger = pino({ level: config.LOG_LEVEL });
  const running = await startService(config, db, logger);
  return {
    ...running,
    db,
    config,
    databaseUrl: owned?.url ?? options.databaseUrl,
    http: client(running.url),
    async close() {
      await running.stop();
      await owned?.drop();
    },
  };
}

/** A fresh, migrated database without a running service. */
export async function createMigratedDatabase() {
  const t = await createTestDatabase();
  await migrate(t.db);
  return t;
}

/** A name no other test uses. */
export function unique(prefix: string): string {
  return `${prefix}${randomBytes(5).toString('hex')}`;
}
