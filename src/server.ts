import { ConfigError, loadConfig } from './config.ts';
import { EnvFileError, loadEnvFile, type EnvFileResult } from './config/env-file.ts';
import { tightenPrivateDir, usePrivateUmask } from './config/private-dir.ts';
import { bcryptPriority } from './auth/passwords.ts';
import { openDatabase } from './db/open.ts';
import { removeServiceAddress, saveServiceAddress } from './demo/address.ts';
import { demoBanner, seedDemoOnFirstStart } from './demo/seed.ts';
import { createLogger } from './logger.ts';
import { startService } from './service.ts';
import { STOP_MS } from './stop-budget.ts';

/** Entry point: config -> database -> service -> listen; graceful stop on SIGTERM/SIGINT. */
async function main(): Promise<void> {
  usePrivateUmask(); // what the service creates (DATA_DIR, the database's files, keys, mail) is its user's alone
  // A stop asked for while the service starts (or seeds its demo) is honoured once it has
  // started, within the same bound as any stop: by default the signal ended the process
  // there, a demo half-made (its client without its user, never finished afterwards).
  let stop = undefined as ((signal: string) => Promise<void>) | undefined;
  let stopAsked: string | undefined;
  const onSignal = (signal: string) => {
    if (stop) return void stop(signal);
    if (stopAsked) return;
    stopAsked = signal;
    setTimeout(() => process.exit(1), STOP_MS).unref(); // a start that does not finish in time
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
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
  // a DATA_DIR an older version or a looser umask left open to others is closed (0700, files
  // 0600); the embedded database's open does the same for its own (src/db/open.ts)
  const { notTightened } = await tightenPrivateDir(config.DATA_DIR, { create: false });
  if (notTightened.length > 0) logger.warn({ files: notTightened.slice(0, 20), count: notTightened.length }, 'files in DATA_DIR others can read that this user may not change');
  const priority = bcryptPriority();
  if (priority.lowered) logger.debug({ threads: priority.threads, nice: priority.nice }, "bcrypt's threads lowered");
  else if (process.platform === 'linux') {
    logger.warn("bcrypt runs at the event loop's priority: start with `node --require=./scripts/pool-priority.cjs` (as npm start does) so a login storm cannot delay other requests");
  }
  const db = await openDatabase(config, { serve: true });
  const running = await startService(config, db, logger);
  logger.info({ url: running.url, ...(running.metricsUrl ? { metrics_url: running.metricsUrl } : {}), database: db.kind }, 'auth service listening');
  // for the command line (`admin demo`): the address it listens on, whatever the shell's PORT
  await saveServiceAddress(config.DATA_DIR, running.url).catch((err: unknown) => logger.warn({ err }, 'could not record the service address in DATA_DIR'));
  // first start on the embedded database outside production: a demo to click through
  const seeding = seedDemoOnFirstStart(running.services, config, running.url).then((demo) => {
    if (demo) console.log(demoBanner(demo));
  }, (err: unknown) => {
    logger.warn({ err }, 'demo seeding failed');
  });

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
      await seeding; // a demo is made whole before the stop (a client without its user otherwise)
      await running.stop(); // in-flight requests answered, workers done with their current attempt
      await removeServiceAddress(config.DATA_DIR);
      await db.close();
    } catch (err) {
      logger.error({ err }, 'shutdown failed');
      process.exit(1);
    }
    logger.info('stopped');
    process.exit(0);
  };
  stop = shutdown;
  if (stopAsked) void shutdown(stopAsked);
  await seeding;
}

main().catch((err) => {
  console.error(`auth service failed to start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
