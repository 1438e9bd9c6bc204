import type { Logger } from 'pino';
import { createUserAdmin } from './admin/users.ts';
import { createPasswordService } from './auth/password-service.ts';
import { createAuthService } from './auth/service.ts';
import { createSessionService } from './auth/sessions.ts';
import { createClientService } from './clients/service.ts';
import { createLinkService } from './links/service.ts';
import type { Config } from './config.ts';
import type { Db } from './db/db.ts';
import { createMailer } from './mail/mailer.ts';
import { createMetrics, type Metrics } from './metrics/metrics.ts';
import type { SigningKeys } from './sso/keys.ts';
import { createSsoService } from './sso/service.ts';
import { createUserService } from './users/service.ts';
import { createOutbox, type EventOutbox } from './webhooks/events.ts';
import { createWebhookService } from './webhooks/service.ts';

/** What every use case may need: plain values, no container. */
export interface Deps {
  config: Config;
  db: Db;
  logger: Logger;
  /** The token keys: one signs, every one verifies (src/sso/keys.ts). */
  signingKeys: SigningKeys;
  outbox: EventOutbox;
  /** Prometheus counters; code that observes an event increments the matching one. */
  metrics: Metrics;
}

/** Wires queries into services; one object per capability. */
export function createServices(base: Omit<Deps, 'outbox' | 'metrics'> & { outbox?: EventOutbox; metrics?: Metrics }) {
  const deps: Deps = { ...base, outbox: base.outbox ?? createOutbox(), metrics: base.metrics ?? createMetrics({ db: base.db }) };
  const users = createUserService(deps);
  const auth = createAuthService(deps);
  const mailer = createMailer(deps.config, deps.logger);
  return {
    deps,
    clients: createClientService(deps),
    users,
    userAdmin: createUserAdmin({ db: deps.db, users }),
    sso: createSsoService(deps),
    links: createLinkService({ db: deps.db }),
    webhooks: createWebhookService(deps),
    auth,
    mailer,
    passwords: createPasswordService({ ...deps, auth, mailer }),
    sessions: createSessionService(deps),
  };
}

export type Services = ReturnType<typeof createServices>;
