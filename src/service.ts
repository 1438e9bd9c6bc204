import type { AddressInfo } from 'node:net';
import http from 'node:http';
import type { Express } from 'express';
import type { Logger } from 'pino';
import { createApp, createServer } from './app.ts';
import type { Config } from './config.ts';
import type { Db } from './db/db.ts';
import { migrate } from './db/migrate.ts';
import { assertSchemaUsable } from './db/schema-check.ts';
import { createServices, type Services } from './deps.ts';
import { gracefulCloser } from './http/graceful-close.ts';
import { createRateLimiters } from './http/rate-limit.ts';
import { metricsHandler, startMetricsListener } from './metrics/listener.ts';
import { createMetrics } from './metrics/metrics.ts';
import { startPruner } from './retention/pruner.ts';
import { seedOnStart } from './seeds/start.ts';
import { startExpirySweep } from './sso/expiry-sweep.ts';
import { loadSigningKeys } from './sso/keys.ts';
import { startDispatcher } from './webhooks/dispatcher.ts';
import { startDispatcherThread } from './webhooks/dispatcher-thread.ts';
import { AFTER_DRAIN_MS, DRAIN_MS } from './stop-budget.ts';


/** A running instance: its HTTP server, URL, services, and an orderly stop. */
export interface RunningService {
  server: http.Server;
  url: string;
  /** Base URL of the metrics listener (METRICS_PORT), or undefined when it is off. */
  metricsUrl?: string;
  services: Services;
  stop(): Promise<void>;
}


/** Resolves when `work` does or after `ms`, whichever is first; `onTimeout` says which. */
async function withDeadline(work: Promise<unknown>, ms: number, onTimeout: () => void): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), ms);
  });
  try {
    if ((await Promise.race([work.then(() => 'done' as const), late])) === 'late') onTimeout();
  } finally {
    clearTimeout(timer);
  }
}

/** One instance before it listens: the Express app, its services and an orderly stop. */
export interface ServiceInstance {
  app: Express;
  services: Services;
  /** The metrics listener's requests (src/metrics/listener.ts): served on METRICS_PORT by startService, never by the app. */
  metrics: http.RequestListener;
  /**
   * Stops the background workers while `drain` (in-flight requests) runs, and those that
   * carry on what requests started (webhook dispatcher, reset mail) once it is done, then
   * closes the rate limiters; the caller closes the database.
   */
  stop(drain?: Promise<void>): Promise<void>;
}

/**
 * Builds one instance on an open database: migrations, the schema and privilege check
 * (SchemaCheckError when the database cannot serve), signing keys, services, the Express
 * app and the background workers (webhook dispatcher, token.expired sweep, pruner). It does not
 * listen: `startService` does, and the tests drive `app` in-process.
 */
export async function createInstance(config: Config, db: Db, logger: Logger): Promise<ServiceInstance> {
  const applied = await migrate(db);
  if (applied.length > 0) logger.info({ applied }, 'migrations applied');
  // A dropped table or a user that may only read stops the start here, with one line naming
  // what is missing, instead of a ready service answering 500s.
  await assertSchemaUsable(db);
  // SEED_ON_START: the files applied before the instance is ready; refused, it stays unready
  const readiness = { reason: await seedOnStart(db, config, logger) };
  const signingKeys = await loadSigningKeys(config);
  const services = createServices({ config, db, logger, signingKeys, metrics: createMetrics({ db, processMetrics: true }), readiness });
  // unusable OpenID Connect keys stop the start here, saying why
  services.oidc.loadKeys();
  const limiters = createRateLimiters(config, services.deps.metrics, logger);
  const app = createApp({ ...services, limiters });
  // Workers that carry on what requests started (webhook deliveries handed over by a commit,
  // reset mail) stop once the requests in flight are answered; the rest stop meanwhile.
  const afterRequests: Array<{ stop(): Promise<void> }> = [];
  const workers: Array<{ stop(): Promise<void> }> = [];
  // Webhook delivery (handed what a commit recorded, or woken by it, by the unit of work;
  // polling for other instances' and retried deliveries) and the token.expired sweep;
  // stop() lets the current attempt finish.
  // On PostgreSQL the dispatcher has a thread of its own (dispatcher-thread.ts); the
  // embedded database lives in this thread's memory, so there it shares this one.
  afterRequests.push(db.connectionString
    ? startDispatcherThread({
      settings: {
        connectionString: db.connectionString,
        config: {
          NODE_ENV: config.NODE_ENV, WEBHOOK_ALLOW_PRIVATE: config.WEBHOOK_ALLOW_PRIVATE,
          WEBHOOK_TIMEOUT_MS: config.WEBHOOK_TIMEOUT_MS, WEBHOOK_BACKOFF_MS: config.WEBHOOK_BACKOFF_MS,
          DATABASE_STATEMENT_TIMEOUT: config.DATABASE_STATEMENT_TIMEOUT,
        },
      },
      logger, outbox: services.outbox, metrics: services.deps.metrics,
    })
    : startDispatcher({ db, config, logger, outbox: services.outbox, metrics: services.deps.metrics }));
  // forgot-password requests finish their mail before the database closes
  afterRequests.push({ stop: async () => { await services.passwords.drain(); services.mailer.close(); } });
  workers.push(startExpirySweep({ db, events: services.deps.events, logger, intervalMs: config.TOKEN_SWEEP_INTERVAL_MS }));
  // Retention: rows past it are deleted every PRUNE_INTERVAL, in batches (retention/pruner.ts).
  workers.push(startPruner({ db, config, logger, metrics: services.deps.metrics }));
  workers.push({ stop: () => services.clients.close() }); // its connection listening for client changes
  return {
    app,
    services,
    metrics: metricsHandler(services.deps.metrics, config.METRICS_TOKEN),
    async stop(drain) {
      // Every worker is waited for whatever another one does: one that fails to stop must not
      // let the caller close the database under the others.
      const stopping = (w: { stop(): Promise<void> }, name: string) => w.stop().catch((err: unknown) => logger.error({ err, worker: name }, 'worker failed to stop'));
      // A token issued while draining has its user.login delivery handed to the dispatcher,
      // which must still be taking them: stopped first, the delivery would wait out its lease.
      // They get AFTER_DRAIN_MS at most (src/stop-budget.ts: the drain may have used DRAIN_MS of STOP_MS):
      // an attempt cut off is made again when its lease ends, a mail not sent is logged.
      const afterDrain = Promise.resolve(drain).catch(() => {}).then(() => withDeadline(
        Promise.all(afterRequests.map((w) => stopping(w, 'after requests'))), AFTER_DRAIN_MS,
        () => logger.warn({ ms: AFTER_DRAIN_MS }, 'webhook attempts or reset mail still running at shutdown; leaving them'),
      ));
      await Promise.all([afterDrain, ...workers.map((w) => stopping(w, 'background'))]);
      await limiters.close();
    },
  };
}

/**
 * Starts one instance and listens on PORT/HOST. `stop` stops accepting, lets in-flight
 * requests finish, stops the workers, and leaves closing the database to the caller that
 * opened it.
 */
export async function startService(config: Config, db: Db, logger: Logger): Promise<RunningService> {
  const instance = await createInstance(config, db, logger);
  const server = createServer(instance.app);
  server.keepAliveTimeout = 65_000;
  const closer = gracefulCloser(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.PORT, config.HOST, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = config.HOST === '0.0.0.0' || config.HOST === '::' ? '127.0.0.1' : config.HOST;
  // the metrics listener (METRICS_PORT) next: a port that cannot be had stops the start, as PORT does
  const metrics = await startMetricsListener(config, instance.metrics, logger).catch(async (err: unknown) => {
    await closer.close(0);
    await instance.stop();
    throw err;
  });
  return {
    server,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    metricsUrl: metrics?.url,
    services: instance.services,
    async stop() {
      // Stop accepting and drain in-flight requests (at most DRAIN_MS) while the
      // sweep and the pruner finish their current batch; then the dispatcher its attempts (at
      // most its thread's stop grace): inside the 25 s server.ts allows before it forces an exit.
      // Metrics are served until then: a scrape during the drain sees it.
      try {
        await instance.stop(closer.close(DRAIN_MS));
      } finally {
        await metrics?.close();
      }
    },
  };
}
