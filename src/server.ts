import { ConfigError, loadConfig } from './config.ts';
import { EnvFileError, loadEnvFile, type EnvFileResult } from './config/env-file.ts';
import { openDatabase } from './db/open.ts';
import { demoBanner, seedDemoOnFirstStart } from './demo/seed.ts';
import { createLogger } from './logger.ts';
import { startService } from './service.ts';
import { STOP_MS } from './stop-budget.ts';

/** Entry point: config -> database -> service -> listen; graceful stop on SIGTERM/SIGINT. */
async function main(): Promise<void> {
  let config;
  let envFile: EnvFileResult;
  try {
    envFile = loadEnvFile(); // .env in the working directory, the real environment winning
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError || err instanceof EnvFileError) {
      console.error(err.message);
      process.exit(1);
    }
    throw err;
  }
  const logger = createLogger(config.LOG_LEVEL);
  if (envFile.path) logger.info({ file: envFile.path, keys: envFile.applied }, 'environment file read');
  const db = await openDatabase(config, { serve: true });
  const running = await startService(config, db, logger);
  logger.info({ url: running.url, database: db.kind }, 'auth service listening');
  // first start on the embedded database outside production: a demo to click through
  const demo = await seedDemoOnFirstStart(running.services, config, running.url).catch((err: unknown) => {
    logger.warn({ err }, 'demo seeding failed');
    return null;
  });
  if (demo) console.log(demoBanner(demo));

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      // a statement waiting on a lock, or a webhook receiver slower than the stop allows
      logger.error(`shutdown did not finish within ${STOP_MS / 1000} s; exiting without waiting for the rest`);
      process.exit(1);
    }, STOP_MS);
    force.unref();
    try {
      await running.stop(); // in-flight requests answered, workers done with their current attempt
      await db.close();
    } catch (err) {
      logger.error({ err }, 'shutdown failed');
      process.exit(1);
    }
    logger.info('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((err) => {
  console.error(`auth service failed to start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
