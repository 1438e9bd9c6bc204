import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Express } from 'express';
import pino, { type Logger } from 'pino';
import { type Config, loadConfig } from '../../src/config.ts';
import type { Db } from '../../src/db/db.ts';
import type { Services } from '../../src/deps.ts';
import { createInstance } from '../../src/service.ts';
import { createServer } from '../../src/app.ts';
import { createMigratedTestDatabase } from './db.ts';
import { client } from './http.ts';

/** The service in-process on a test database: requests go to `app` through supertest. */
export interface TestApp {
  /** The Express app: `http` sends to it in-process. */
  app: Express;
  services: Services;
  db: Db;
  config: Config;
  /** Connection string of the test database (PostgreSQL runs only). */
  databaseUrl?: string;
  http: ReturnType<typeof client>;
  /** Requests to the metrics listener's handler (METRICS_PORT in production; the public app has no /metrics). */
  metrics: ReturnType<typeof client>;
  /**
   * Serves the app on a loopback port and returns its base URL (for a browser or a client
   * that needs a real URL); the same URL on later calls. `close` stops it. `port`: that port
   * (a test whose PUBLIC_URL must name it, as passkeys' origin does), else any free one.
   */
  listen(port?: number): Promise<string>;
  /** Stops this instance (server, workers, limiters) and leaves its database open. */
  stop(): Promise<void>;
  /** Stops the instance and drops the database it created. */
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
  RATE_LIMIT_TOKEN_PER_MIN: '100000',
  RATE_LIMIT_USER_PER_MIN: '100000',
  RATE_LIMIT_CLIENT_AUTH_FAILURES_PER_MIN: '100000',
  WEBHOOK_ALLOW_PRIVATE: 'true',
  LOG_LEVEL: 'silent',
  // the OpenID Connect signing key (an RSA key made for the tests), as production requires one
  OIDC_SIGNING_KEYS_FILE: fileURLToPath(new URL('../db/fixtures/oidc-test-key.pem', import.meta.url)),
};

/**
 * Builds the real service in-process on a fresh database (or on `options.db`, to run a
 * second instance against the same one), with its background workers running. `env`
 * overrides configuration keys; `logger` replaces the silent one.
 */
export async function startTestApp(
  env: Record<string, string> = {},
  options: { db?: Db; databaseUrl?: string; logger?: Logger } = {},
): Promise<TestApp> {
  const owned = options.db ? undefined : await createMigratedTestDatabase();
  const db = options.db ?? owned!.db;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-test-'));
  const config = loadConfig({ ...TEST_ENV, DATA_DIR: dataDir, ...env });
  const logger = options.logger ?? pino({ level: config.LOG_LEVEL });
  const instance = await createInstance(config, db, logger);
  let server: http.Server | undefined;
  let url: Promise<string> | undefined;
  const testApp: TestApp = {
    app: instance.app,
    services: instance.services,
    db,
    config,
    databaseUrl: owned?.url ?? options.databaseUrl,
    http: client(instance.app),
    metrics: client(instance.metrics),
    listen(port = 0) {
      url ??= new Promise<string>((resolve, reject) => {
        server = createServer(instance.app);
        server.once('error', reject);
        server.listen(port, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server!.address() as AddressInfo).port}`));
      });
      return url;
    },
    async stop() {
      if (server) {
        server.closeAllConnections();
        await new Promise((resolve) => server!.close(resolve));
        server = undefined;
      }
      await instance.stop();
    },
    async close() {
      await testApp.stop();
      await owned?.drop();
    },
  };
  return testApp;
}

/** A fresh, migrated database without a running service. */
export function createMigratedDatabase() {
  return createMigratedTestDatabase();
}

/** A name no other test uses. */
export function unique(prefix: string): string {
  return `${prefix}${randomBytes(5).toString('hex')}`;
}
