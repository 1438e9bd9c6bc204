import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Db } from '../db/db.ts';
import { countPendingDeliveries } from '../webhooks/queries.ts';

/**
 * The service's Prometheus metrics. Each instance has its own Registry (never the global
 * one) so several apps in one process (the tests) do not share or clash over counters.
 * Code that observes an event increments the matching counter on `deps.metrics`.
 */
export interface Metrics {
  registry: Registry;
  /** Request duration by method, route pattern (never the raw path) and status. */
  httpDuration: Histogram<'method' | 'route' | 'status'>;
  /** Requests being handled right now. */
  httpInFlight: Gauge;
  /** SSO tokens signed, by flow (server_to_server, browser, dashboard). */
  tokensIssued: Counter<'flow'>;
  /** SSO tokens accepted by /api/sso/validate or the legacy route. */
  tokensValidated: Counter;
  /** SSO token validations refused, by reason (invalid_token, token_expired, ...). */
  tokensRejected: Counter<'reason'>;
  /** Failed user logins, by reason: invalid_credentials (unknown name, wrong password, inactive user: one value, so the anonymous /metrics reveals no usernames), invalid_totp, account_locked. */
  loginFailures: Counter<'reason'>;
  /** Accounts locked after too many failed logins. */
  lockouts: Counter;
  /** Requests refused by a rate limit, by limiter (login, validate, token, user). */
  rateLimited: Counter<'limiter'>;
  /** Webhook delivery attempts, by outcome (succeeded, retry, failed). */
  webhookDeliveries: Counter<'outcome'>;
  /** Rows deleted by the pruner (retention), by table. */
  prunedRows: Counter<'table'>;
  /** When this instance's last pruning pass ended (Unix seconds; 0 before the first). */
  pruneLastPass: Gauge;
}

/**
 * Creates the metrics. With `db`, the outbox depth and the database pool use are read on
 * each scrape; with `processMetrics`, prom-client's process metrics (CPU, memory, event
 * loop lag) are collected too.
 */
export function createMetrics(options: { db?: Db; processMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  const registers = [registry];
  if (options.processMetrics) collectDefaultMetrics({ register: registry });
  const { db } = options;

  if (db) {
    new Gauge({
      name: 'auth_outbox_pending',
      help: 'Webhook deliveries waiting to be sent or retried',
      registers,
      async collect() {
        try {
          this.set(await countPendingDeliveries(db));
        } catch {
          // The database is unreachable: leave the last value; /readyz reports the outage.
        }
      },
    });
    new Gauge({
      name: 'auth_db_pool_connections',
      help: 'Database connections by state (total, idle, waiting requests)',
      labelNames: ['state'],
      registers,
      collect() {
        const s = db.poolStats();
        this.set({ state: 'total' }, s.total);
        this.set({ state: 'idle' }, s.idle);
        this.set({ state: 'waiting' }, s.waiting);
      },
    });
  }

  return {
    registry,
    httpDuration: new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request duration by method, route pattern and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    httpInFlight: new Gauge({ name: 'http_requests_in_flight', help: 'HTTP requests being handled', registers }),
    tokensIssued: new Counter({ name: 'auth_tokens_issued_total', help: 'SSO tokens issued, by flow', labelNames: ['flow'], registers }),
    tokensValidated: new Counter({ name: 'auth_tokens_validated_total', help: 'SSO tokens validated successfully', registers }),
    tokensRejected: new Counter({ name: 'auth_tokens_rejected_total', help: 'SSO token validations refused, by reason', labelNames: ['reason'], registers }),
    loginFailures: new Counter({ name: 'auth_login_failures_total', help: 'Failed user logins, by reason', labelNames: ['reason'], registers }),
    lockouts: new Counter({ name: 'auth_lockouts_total', help: 'Accounts locked after repeated failed logins', registers }),
    rateLimited: new Counter({ name: 'auth_rate_limited_total', help: 'Requests refused by a rate limit, by limiter', labelNames: ['limiter'], registers }),
    webhookDeliveries: new Counter({ name: 'auth_webhook_deliveries_total', help: 'Webhook delivery attempts, by outcome', labelNames: ['outcome'], registers }),
    prunedRows: new Counter({ name: 'auth_pruned_rows_total', help: 'Rows deleted past their retention, by table', labelNames: ['table'], registers }),
    pruneLastPass: new Gauge({ name: 'auth_prune_last_pass_timestamp_seconds', help: 'When the last pruning pass of this instance ended (Unix time)', registers }),
  };
}
