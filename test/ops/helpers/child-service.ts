import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { loadConfig } from '../../../src/config.ts';
import { createServices, type Services } from '../../../src/deps.ts';
import { migrate } from '../../../src/db/migrate.ts';
import { openDatabase } from '../../../src/db/open.ts';
import { loadSigningKeys } from '../../../src/sso/keys.ts';
import { TEST_ENV } from '../../helpers/app.ts';
import { createMigratedTestDatabase } from '../../helpers/db.ts';
import { startServerProcess as startListening } from '../../helpers/processes.ts';

/**
 * The environment of a real server process on a fresh database: on PostgreSQL a migrated copy
 * of the template (test/helpers/db.ts), else an embedded one in DATA_DIR that `seed` migrates.
 * PORT=0 and METRICS_PORT=0: the process takes ports of its own and names them (startServerProcess). A port
 * found free here could be taken by another test's connection or server before the process
 * binds it, and a probe of it then answered by that other server.
 */
export async function prepareServerEnv(): Promise<{ env: Record<string, string>; drop(): Promise<void> }> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-child-'));
  const env: Record<string, string> = { ...TEST_ENV, PORT: '0', HOST: '127.0.0.1', METRICS_PORT: '0', DATA_DIR: dataDir, LOG_LEVEL: 'info' };
  if (process.env.TEST_DATABASE_URL) {
    const t = await createMigratedTestDatabase();
    env.DATABASE_URL = t.url!;
    return { env, drop: () => t.drop() };
  }
  return { env, drop: async () => {} };
}

/**
 * Opens the database the server will use (before it runs: the embedded one allows a single
 * process), migrates it and lets `seed` create data through the real services.
 */
export async function seed<T>(env: Record<string, string>, fn: (services: Services) => Promise<T>): Promise<T> {
  const config = loadConfig(env);
  const db = await openDatabase(config, { serve: false });
  try {
    await migrate(db);
    const services = createServices({ config, db, logger: pino({ level: 'silent' }), signingKeys: await loadSigningKeys(config) });
    return await fn(services);
  } finally {
    await db.close();
  }
}

/** `tsx src/server.ts` as a child process with its stdout collected. */
export interface ServerProcess {
  child: ChildProcess;
  url: string;
  /** Base URL of its metrics listener (METRICS_PORT=0 in prepareServerEnv), when it has one. */
  metricsUrl?: string;
  /** The port it listens on (the one it named). */
  port: number;
  output: () => string;
  exited: Promise<number | null>;
}

/**
 * Starts the real entry point (test/helpers/processes.ts: it waits for the process's own
 * "listening" log line, which names its port) and adds the port and its exit.
 */
export async function startServerProcess(env: Record<string, string>): Promise<ServerProcess> {
  const { child, url, metricsUrl, output } = await startListening(env);
  const exited = child.exitCode !== null ? Promise.resolve(child.exitCode)
    : once(child, 'exit').then(([code]) => code as number | null);
  return { child, url, metricsUrl, port: Number(new URL(url).port), output, exited };
}
