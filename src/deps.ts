import { createAccessService } from './access/service.ts';
import { createUserAdmin } from './admin/users.ts';
import { createAuditLog } from './audit/service.ts';
import { createPasswordService } from './auth/password-service.ts';
import { createAuthService } from './auth/service.ts';
import { createSessionService } from './auth/sessions.ts';
import { createClientService } from './clients/service.ts';
import { createLinkService } from './links/service.ts';
import type { Deps } from './context.ts';
import { createMailer } from './mail/mailer.ts';
import { createMetrics, type Metrics } from './metrics/metrics.ts';
import { createSsoService } from './sso/service.ts';
import { createUserService } from './users/service.ts';
import { createOutbox, type EventOutbox } from './webhooks/events.ts';
import { createWebhookService } from './webhooks/service.ts';

/**
 * Wires queries into services; one object per capability. One outbox per process: the use
 * cases get its recorder side (`deps.events`), the dispatcher its other side (`outbox`).
 */
export function createServices(base: Omit<Deps, 'events' | 'metrics'> & { outbox?: EventOutbox; metrics?: Metrics }) {
  const { outbox: given, ...rest } = base;
  const outbox = given ?? createOutbox();
  const deps: Deps = { ...rest, events: outbox, metrics: base.metrics ?? createMetrics({ db: base.db }) };
  const users = createUserService(deps);
  const auth = createAuthService(deps);
  const links = createLinkService({ db: deps.db });
  const mailer = createMailer(deps.config, deps.logger);
  return {
    deps,
    outbox,
    clients: createClientService(deps),
    users,
    userAdmin: createUserAdmin({ db: deps.db, users, links, twoFactor: auth.twoFactor }),
    sso: createSsoService(deps),
    links,
    webhooks: createWebhookService(deps),
    audit: createAuditLog(deps),
    auth,
    mailer,
    passwords: createPasswordService({ ...deps, auth, mailer }),
    sessions: createSessionService(deps),
    access: createAccessService(deps),
  };
}

export type Services = ReturnType<typeof createServices>;
