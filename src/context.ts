import type { Logger } from 'pino';
import type { Config } from './config.ts';
import type { Db } from './db/db.ts';
import type { Metrics } from './metrics/metrics.ts';
import type { SigningKeys } from './sso/keys.ts';
import type { EventRecorder } from './webhooks/events.ts';

/**
 * What every use case may need: plain values, no container. A leaf of the module graph: it
 * imports no service, so every service can import it without a cycle (src/deps.ts, which
 * builds the services, imports them all).
 */
export interface Deps {
  config: Config;
  db: Db;
  logger: Logger;
  /** The token keys: one signs, every one verifies (src/sso/keys.ts). */
  signingKeys: SigningKeys;
  /** Where use cases record webhook events, inside their transactions (src/webhooks/events.ts). */
  events: EventRecorder;
  /** Prometheus counters; code that observes an event increments the matching one. */
  metrics: Metrics;
  /**
   * Why this instance, though it runs, must not be sent traffic (a seed refused at start:
   * SEED_ON_START); /readyz answers 503 with it. Unset or null: nothing of the kind.
   */
  readiness?: { reason: string | null };
}
