import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { loadConfig } from '../../../src/config.ts';
import { createServices, type Services } from '../../../src/deps.ts';
import { migrate } from '../../../src/db/migrate.ts';
import { openDatabase } from '../../../src/db/open.ts';
import { loadSigningKeys } from '../../../src/sso/keys.ts';
import { TEST_ENV } from '../../helpers/app.ts';
import { createMigratedTestDatabase } from '../../helpers/db.ts';
import { request } from '../../helpers/http.ts';
import { listeningUrl } from '../../helpers/processes.ts';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/**
 * The environment of a real server process on a fresh database: on PostgreSQL a migrated copy
 * of the template (test/helpers/db.ts), else an embedded one in DATA_DIR that `seed` migrates.
 * PORT=0: the process takes a port of its own and names it (startServerProcess). A port
 * found free here could be taken by another test's connection or server before the process
 * binds it, and a probe of it then answered by that other server.
 */
export async function prepareServerEnv(): Promise<{ env: Record<string, string>; drop(): Promise<void> }> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-child-'));
  const env: Record<string, string> = { ...TEST_ENV, PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'info' };
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
  /** The port it listens on (the one it named). */
  port: number;
  output: () => string;
  exited: Promise<number | null>;
}

/**
 * Starts the real entry point and waits for its own "listening" log line, which names its
 * port (listeningUrl), then until /healthz answers there.
 */
export async function startServerProcess(env: Record<string, string>): Promise<ServerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const { url, output } = await listeningUrl(child);
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`server exited early: ${output()}`);
    const ok = await request(`${url}/healthz`).then((r) => r.status === 200, () => false);
    if (ok) break;
    if (i > 600) throw new Error(`server did not start: ${output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { child, url, port: Number(new URL(url).port), output, exited };
}
