import { findClient } from '../../src/clients/queries.ts';
import type { Config } from '../../src/config.ts';
import type { Db, QueryOptions } from '../../src/db/db.ts';
import { createMetrics } from '../../src/metrics/metrics.ts';
import { createSsoService } from '../../src/sso/service.ts';
import { signingKeysOf } from '../../src/sso/keys.ts';
import { findUserByUsername } from '../../src/users/queries.ts';
import type { EventOutbox } from '../../src/webhooks/events.ts';

/*
 * What the tests that start a dispatcher directly (src/webhooks/dispatcher.ts) share: tokens
 * issued through the SSO service, so their user.login deliveries are recorded (and handed
 * over) as in the service; the webhooks and deliveries of the test database; the claim
 * statements counted.
 */

/** Polls once an hour: whatever arrives sooner was handed over or claimed on a wake, not found by a poll. */
export const NEVER = 3_600_000;

/** A webhook's deliveries, in id order. */
export interface DeliveryRow {
  id: string;
  status: string;
  attempts: number;
  leased: boolean;
  last_error: string | null;
}

/**
 * The kit for the test database `dbOf()` (created in a beforeAll, so read when used), whose
 * user and client are both named `name` (insertUserAndClient).
 */
export function dispatcherKit(dbOf: () => Db, name: string, config: Config) {
  const addWebhook = async (url: string, secret = 'dispatcher-kit-secret-0123456789') => (await dbOf().query<{ id: number }>(
    "INSERT INTO webhooks (url, events, secret) VALUES ($1, '{user.login}', $2) RETURNING id", [url, secret])).rows[0].id;
  return {
    /** Issues `count` tokens together (one statement records them all): for a known user (the browser flow), or by username (server to server). */
    async issue(outbox: EventOutbox, count: number, way: 'for user' | 'by username' = 'for user'): Promise<void> {
      const db = dbOf();
      const sso = createSsoService({ db, config, signingKeys: signingKeysOf(Buffer.from(config.JWT_SECRET!)), events: outbox, metrics: createMetrics() });
      const client = (await findClient(db, name))!;
      const user = (await findUserByUsername(db, name))!;
      await Promise.all(Array.from({ length: count }, () => (way === 'for user'
        ? sso.issueForUser(client, user, { ipAddress: '127.0.0.1', userAgent: 'test', flow: 'test' })
        : sso.issueByUsername(client, name, { ipAddress: '127.0.0.1', userAgent: 'test' }))));
    },

    /** A new active webhook for `url`, subscribed to user.login. */
    addWebhook,

    /** The only active webhooks from now on: these URLs, subscribed to user.login. */
    async onlyWebhooks(urls: readonly string[], secret?: string): Promise<number[]> {
      await dbOf().query('UPDATE webhooks SET active = false');
      const ids: number[] = [];
      for (const url of urls) ids.push(await addWebhook(url, secret));
      return ids;
    },

    deliveries: async (webhookId: number) => (await dbOf().query<DeliveryRow>(
      'SELECT id, status, attempts, locked_until IS NOT NULL AS leased, last_error FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY id', [webhookId])).rows,

    /** The test database, counting the claim statements made through it. */
    countingClaims(): { db: Db; claims: () => number } {
      let claims = 0;
      const counting = new Proxy(dbOf(), {
        get(target, prop) {
          if (prop === 'query') {
            return (sql: string, ...rest: [unknown[]?, QueryOptions?]) => {
              if (sql.includes('SKIP LOCKED')) claims++;
              return target.query(sql, ...rest);
            };
          }
          const value = Reflect.get(target, prop, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      return { db: counting, claims: () => claims };
    },
  };
}
