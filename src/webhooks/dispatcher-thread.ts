import { Worker as Thread } from 'node:worker_threads';
import pino, { type Logger } from 'pino';
import type { Metrics } from '../metrics/metrics.ts';
import type { DispatcherSettings, FromDispatcherThread, ToDispatcherThread } from './dispatcher-worker.ts';
import type { EventOutbox } from './events.ts';
import { deliveryLeaseMs, type Worker } from './dispatcher.ts';
import { dispatcherThreadEntry } from './thread-entry.ts';
import { THREAD_STOP_MS } from '../stop-budget.ts';

/** The dispatcher thread's young generation, in MiB. */
const DISPATCHER_YOUNG_GENERATION_MB = 4;

/** Pause before a thread that died is started again. */
const RESTART_DELAY_MS = 1_000;

/**
 * Runs the webhook dispatcher (dispatcher.ts, unchanged) on its own thread with its own
 * PostgreSQL connections. Under API load the main thread's event loop is busy with requests;
 * on its own loop, and on the machine's other cores, a delivery goes out as soon as its
 * event commits instead of waiting its turn behind them, and sending does not take CPU
 * time from the API.
 *
 * The main thread wakes it after every commit that enqueued (outbox.wake), posts it the
 * deliveries written already leased to it (outbox.handOff), writes its log
 * lines to the main logger's destination (already redacted there), and counts its attempts
 * in the main /metrics. If the thread dies it is started again; deliveries it had claimed
 * are attempted again when their lease ends (at least once).
 */
export function startDispatcherThread(options: {
  settings: Omit<DispatcherSettings, 'logLevel'>;
  logger: Logger;
  outbox: EventOutbox;
  metrics?: Pick<Metrics, 'webhookDeliveries'>;
}): Worker {
  const { logger, outbox } = options;
  const destination = (logger as unknown as Record<symbol, { write(line: string): void }>)[pino.symbols.streamSym];
  let stopping = false;
  let thread: Thread | null = null;
  let restartTimer: NodeJS.Timeout | null = null;

  const send = (message: ToDispatcherThread) => thread?.postMessage(message);

  function start() {
    const settings: DispatcherSettings = { ...options.settings, logLevel: logger.level };
    // A small young generation: the thread's garbage (a claim every poll, a few deliveries) is
    // little, and V8's default semi-spaces were kept resident by it, about 45 MiB at rest.
    const t = new Thread(dispatcherThreadEntry(logger), { workerData: settings, resourceLimits: { maxYoungGenerationSizeMb: DISPATCHER_YOUNG_GENERATION_MB } });
    thread = t;
    t.on('message', (m: FromDispatcherThread) => {
      if (m.type === 'log') destination.write(m.line);
      else if (m.type === 'attempt') options.metrics?.webhookDeliveries.inc({ outcome: m.outcome });
    });
    t.on('error', (err) => logger.error({ err }, 'webhook dispatcher thread failed'));
    t.on('exit', (code) => {
      if (thread === t) thread = null;
      if (stopping) return;
      logger.error({ code }, 'webhook dispatcher thread exited; starting it again');
      restartTimer = setTimeout(start, RESTART_DELAY_MS);
      restartTimer.unref();
    });
  }

  const unsubscribe = outbox.onWake(() => send({ type: 'wake' }));
  // Deliveries written already leased are posted to the thread; posted while it restarts,
  // they are lost here and claimed again when their lease ends.
  const stopHandingOff = outbox.onHandOff(deliveryLeaseMs(options.settings.config), (deliveries) => send({ type: 'deliver', deliveries }));
  start();

  return {
    async stop() {
      stopping = true;
      unsubscribe();
      stopHandingOff();
      if (restartTimer) clearTimeout(restartTimer);
      const t = thread;
      if (!t) return;
      const exited = new Promise<void>((resolve) => t.once('exit', () => resolve()));
      send({ type: 'stop' });
      const grace = setTimeout(() => void t.terminate(), THREAD_STOP_MS);
      await exited;
      clearTimeout(grace);
    },
  };
}
