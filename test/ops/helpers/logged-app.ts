import { createLogger } from '../../../src/logging/logger.ts';
import { startTestApp, type TestApp } from '../../helpers/app.ts';

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
  const app = await startTestApp({ LOG_LEVEL: 'debug', ...env }, { logger });
  return Object.assign(app, { lines, entries: () => lines.map((l) => JSON.parse(l)) });
}
