import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../../src/config.ts';
import { createLogger } from '../../../src/logging/logger.ts';
import { startService } from '../../../src/service.ts';
import { TEST_ENV, type TestApp } from '../../helpers/app.ts';
import { createTestDatabase } from '../../helpers/db.ts';
import { client } from '../../helpers/http.ts';

/** A test app whose process logger (the production one, at debug) writes into `lines`. */
export interface LoggedApp extends TestApp {
  /** Every log line written so far, raw. */
  lines: string[];
  /** The lines parsed as JSON. */
  entries(): Array<Record<string, any>>;
}

/** Starts the real service on a fresh database with its log captured in memory. */
export async function startLoggedApp(env: Record<string, string> = {}): Promise<LoggedApp> {
  const lines: string[] = [];
  const logger = createLogger('debug', { write: (s: string) => void lines.push(s) });
  const owned = await createTestDatabase();
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-ops-'));
  const config = loadConfig({ ...TEST_ENV, DATA_DIR: dataDir, LOG_LEVEL: 'debug', ...env });
  const running = await startService(config, owned.db, logger);
  return {
    ...running,
    db: owned.db,
    config,
    databaseUrl: owned.url,
    http: client(running.url),
    lines,
    entries: () => lines.map((l) => JSON.parse(l)),
    async close() {
      await running.stop();
      await owned.drop();
    },
  };
}
