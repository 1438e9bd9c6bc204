import type { Queryable } from '../db/db.ts';

/** The numbers on the admin overview page. */
export interface Overview {
  users: number;
  active_users: number;
  clients: number;
  active_clients: number;
  tokens_issued_today: number;
  tokens_validated_today: number;
  failed_logins_24h: number;
  lockouts_24h: number;
  locked_now: number;
  webhooks: number;
  deliveries_failed_24h: number;
  deliveries_retrying: number;
}

/**
 * Every count in one round trip. "Today" is the UTC day. Failed logins and lockouts come
 * from the audit log (the lockout counters are reset by a success, the log is not).
 */
export async function readOverview(q: Queryable): Promise<Overview> {
  const r = await q.query<Record<keyof Overview, number | string>>(
    `WITH today AS (SELECT date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS start)
     SELECT
       (SELECT count(*) FROM users) AS users,
       (SELECT count(*) FROM users WHERE active) AS active_users,
       (SELECT count(*) FROM clients) AS clients,
       (SELECT count(*) FROM clients WHERE active) AS active_clients,
       (SELECT count(*) FROM sso_tokens, today WHERE issued_at >= today.start) AS tokens_issued_today,
       (SELECT count(*) FROM sso_tokens, today WHERE used_at >= today.start) AS tokens_validated_today,
       (SELECT count(*) FROM audit_log WHERE action = 'user.login' AND outcome = 'failure' AND at > now() - interval '24 hours') AS failed_logins_24h,
       (SELECT count(*) FROM audit_log WHERE action = 'user.locked' AND at > now() - interval '24 hours') AS lockouts_24h,
       (SELECT count(*) FROM login_attempts WHERE locked_until > now()) AS locked_now,
       (SELECT count(*) FROM webhooks WHERE active) AS webhooks,
       (SELECT count(*) FROM webhook_deliveries WHERE status = 'failed' AND completed_at > now() - interval '24 hours') AS deliveries_failed_24h,
       (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending' AND attempts > 0) AS deliveries_retrying`,
  );
  const row = r.rows[0];
  return Object.fromEntries(Object.entries(row).map(([k, v]) => [k, Number(v)])) as unknown as Overview;
}
