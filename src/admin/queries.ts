import type { Queryable } from '../db/db.ts';
import type { UserRecord } from '../users/user.ts';

/*
 * The administration's read model: statements over several capabilities' tables at once, for
 * the panel and the admin API. Changes go through the capabilities' services.
 */

/** A user row as administrators see it. */
export type AdminUserRow = UserRecord & { locked_until: Date | null; created_at: Date; must_change_password: boolean };

// lockout counters are keyed by the normalized login name, which is the stored username
const SELECT_USERS = `SELECT u.id, u.username, u.email, u.role, u.full_name, u.active, u.totp_enabled, u.created_at, u.must_change_password,
    CASE WHEN a.locked_until > now() THEN a.locked_until END AS locked_until
  FROM users u LEFT JOIN login_attempts a ON a.login = u.username`;

export async function findAdminUserRow(q: Queryable, id: number): Promise<AdminUserRow | null> {
  return (await q.query<AdminUserRow>(`${SELECT_USERS} WHERE u.id = $1`, [id])).rows[0] ?? null;
}

/**
 * The indexed expression of users_search_trgm (migrations/0031): the three searched columns in
 * one value, so that one trigram index serves the search. Keep it identical to the migration's.
 */
const SEARCH_TEXT = `(u.username || ' ' || u.email || ' ' || u.full_name)`;

/** Users whose username, email or full name matches the ILIKE `pattern` (all with null), newest first. */
export async function searchAdminUsers(q: Queryable, pattern: string | null, limit: number): Promise<AdminUserRow[]> {
  const r = pattern !== null
    ? await q.query<AdminUserRow>(
      // the joined text finds the candidates on the index; the columns, one by one, decide
      `${SELECT_USERS} WHERE ${SEARCH_TEXT} ILIKE $1 AND (u.username ILIKE $1 OR u.email ILIKE $1 OR u.full_name ILIKE $1)
        ORDER BY u.id DESC LIMIT $2`,
      [pattern, limit],
    )
    : await q.query<AdminUserRow>(`${SELECT_USERS} ORDER BY u.id DESC LIMIT $1`, [limit]);
  return r.rows;
}

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
 * The user.login failures whose password was right (src/auth/service.ts): the password step of a
 * two-factor sign-in, which goes on to ask for the code, and a sign-in that must choose a new
 * password first. Neither counts toward the lockout, and neither is a failed sign-in on the
 * overview. Every other reason is: a wrong name, password or code, an inactive user (counted
 * toward the lockout like a wrong password), an attempt while locked.
 */
const NOT_FAILED_SIGN_INS = ['totp_required', 'password_change_required'];

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
       (SELECT count(*) FROM audit_log WHERE action = 'user.login' AND outcome = 'failure' AND at > now() - interval '24 hours'
          AND COALESCE(details->>'reason', '') <> ALL ($1::text[])) AS failed_logins_24h,
       (SELECT count(*) FROM audit_log WHERE action = 'user.locked' AND at > now() - interval '24 hours') AS lockouts_24h,
       (SELECT count(*) FROM login_attempts WHERE locked_until > now()) AS locked_now,
       (SELECT count(*) FROM webhooks WHERE active) AS webhooks,
       (SELECT count(*) FROM webhook_deliveries WHERE status = 'failed' AND completed_at > now() - interval '24 hours') AS deliveries_failed_24h,
       (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending' AND attempts > 0) AS deliveries_retrying`,
    [NOT_FAILED_SIGN_INS],
  );
  const row = r.rows[0];
  return Object.fromEntries(Object.entries(row).map(([k, v]) => [k, Number(v)])) as unknown as Overview;
}

/** A webhook in the panel's list: never the secret; the newest delivery's outcome. */
export interface WebhookSummary {
  id: number;
  url: string;
  events: string[];
  active: boolean;
  disabled_reason: string | null;
  created_at: Date;
  last_event: string | null;
  last_status: string | null;
  last_status_code: number | null;
  last_error: string | null;
  last_at: Date | null;
  deliveries: number;
}

/** Every webhook with its newest delivery (one statement, a lateral join per webhook). */
export async function listWebhookSummaries(q: Queryable): Promise<WebhookSummary[]> {
  const r = await q.query<WebhookSummary>(
    `SELECT w.id, w.url, w.events, w.active, w.disabled_reason, w.created_at,
            d.event AS last_event, d.status AS last_status, d.last_status_code, d.last_error,
            COALESCE(d.completed_at, d.created_at) AS last_at,
            (SELECT count(*)::int FROM webhook_deliveries c WHERE c.webhook_id = w.id) AS deliveries
       FROM webhooks w
       LEFT JOIN LATERAL (
         SELECT event, status, last_status_code, last_error, completed_at, created_at
           FROM webhook_deliveries WHERE webhook_id = w.id ORDER BY created_at DESC, id LIMIT 1
       ) d ON true
      ORDER BY w.id`,
  );
  return r.rows;
}

