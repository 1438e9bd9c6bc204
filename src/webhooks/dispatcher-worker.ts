/**
 * The webhook dispatcher's thread (started by dispatcher-thread.ts): its own small pool of
 * PostgreSQL connections, the dispatcher of dispatcher.ts, and messages to and from the
 * main thread.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { Config } from '../config.ts';
import { openPostgres } from '../db/postgres.ts';
import { createLogger } from '../logging/logger.ts';
import { type AttemptCounter, startDispatcher } from './dispatcher.ts';
import { createOutbox } from './events.ts';
import type { ClaimedDelivery } from './delivery-queries.ts';

/** What the thread is started with. */
export interface DispatcherSettings {
  connectionString: string;
  config: Pick<Config, 'NODE_ENV' | 'WEBHOOK_ALLOW_PRIVATE' | 'WEBHOOK_TIMEOUT_MS' | 'WEBHOOK_BACKOFF_MS' | 'DATABASE_STATEMENT_TIMEOUT'>;
  logLevel: string;
  pollMs?: number;
}

export type ToDispatcherThread = { type: 'wake' } | { type: 'deliver'; deliveries: ClaimedDelivery[] } | { type: 'stop' };
export type FromDispatcherThread =
  | { type: 'log'; line: string }
  | { type: 'attempt'; outcome: 'succeeded' | 'retry' | 'failed' };

if (parentPort) {
  const port = parentPort;
  const settings = workerData as DispatcherSettings;
  const post = (m: FromDispatcherThread) => port.postMessage(m);
  const logger = createLogger(settings.logLevel, { write: (line: string) => post({ type: 'log', line }) });
  // Claims, attempt records and polls: a few connections are plenty.
  const db = openPostgres(settings.connectionString, { max: 4, statementTimeoutMs: settings.config.DATABASE_STATEMENT_TIMEOUT });
  const outbox = createOutbox(); // only its wake signal is used here: the main thread enqueues
  const counter: AttemptCounter = { inc: ({ outcome }) => post({ type: 'attempt', outcome }) };
  const dispatcher = startDispatcher({ db, config: settings.config, logger, outbox, pollMs: settings.pollMs, metrics: { webhookDeliveries: counter } });
  port.on('message', (m: ToDispatcherThread) => {
    if (m.type === 'wake') outbox.wake();
    else if (m.type === 'deliver') outbox.handOff(m.deliveries);
    else if (m.type === 'stop') {
      // Attempts under way finish and are recorded, then the thread ends.
      void dispatcher.stop()
        .then(() => db.close())
        .finally(() => process.exit(0));
    }
  });
}
