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
import { createOidcService } from './oidc/service.ts';
import { afterCommitOf } from './db/db.ts';
import { createSsoService } from './sso/service.ts';
import { createUserService } from './users/service.ts';
import { createPasskeyService } from './passkeys/service.ts';
import { createOutbox, type EventOutbox } from './webhooks/events.ts';
import { createWebhookService } from './webhooks/service.ts';

/**
 * Wires queries into services; one object per capability. One outbox per process: the use
 * cases get its recorder side (`deps.events`), the dispatcher its other side (`outbox`).
 */
export function createServices(base: Omit<Deps, 'events' | 'metrics'> & { outbox?: EventOutbox; metrics?: Metrics }) {
  const { outbox: given, ...rest } = base;
  const outbox = given ?? createOutbox();
  // Every way a user's session ends records user.logout (src/auth/sign-out.ts): once that
  // commits, their OpenID Connect sessions end too, with a back-channel logout to the clients.
  const ended: { oidc?: { sessionsEnded(userId: number): Promise<void> } } = {};
  const events: Deps['events'] = {
    async record(tx, event, data) {
      await outbox.record(tx, event, data);
      if (event !== 'user.logout') return;
      for (const one of Array.isArray(data) ? data : [data]) {
        const userId = (one as { user_id?: unknown }).user_id;
        if (typeof userId === 'number') afterCommitOf(tx)(() => void ended.oidc?.sessionsEnded(userId).catch((err: unknown) => rest.logger.warn({ err }, 'OpenID Connect sessions not ended')));
      }
    },
    part: (event, data) => outbox.part(event, data),
    written: (tx) => outbox.written(tx),
  };
  const deps: Deps = { ...rest, events, metrics: base.metrics ?? createMetrics({ db: base.db }) };
  const users = createUserService(deps);
  const clients = createClientService(deps);
  const oidc = createOidcService(deps, clients);
  ended.oidc = oidc;
  const auth = createAuthService(deps);
  const links = createLinkService({ db: deps.db });
  const mailer = createMailer(deps.config, deps.logger);
  return {
    deps,
    outbox,
    clients,
    oidc,
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
    passkeys: createPasskeyService(deps, auth),
    access: createAccessService(deps),
  };
}

export type Services = ReturnType<typeof createServices>;
