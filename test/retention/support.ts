import { randomUUID } from 'node:crypto';
import type { Queryable } from '../../src/db/db.ts';
import type { TestApp } from '../helpers/app.ts';
import { unique } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';

/** Rows of every pruned table, some past the default retentions and some not. */
export interface Seeded {
  /** Keys of rows a pass with the default retentions must delete, per table. */
  gone: Record<string, string[]>;
  /** Keys of rows it must keep, per table. */
  kept: Record<string, string[]>;
}

/** What a pass with the default retentions deletes of one `seed`. */
export const SEEDED_COUNTS = {
  sso_tokens: 4, webhook_deliveries: 2, webhook_attempts: 6, audit_log: 1, login_attempts: 2, sessions: 1, revoked_access_tokens: 1, totp_pending: 1, oidc_artefacts: 1, webauthn_challenges: 1,
};

/**
 * Writes one set of rows straight into the tables, aged by their timestamps (the pruner
 * reads nothing but the rows and the database's clock): for each table, rows just past
 * the default retention (TOKEN_RETENTION 24h, WEBHOOK_RETENTION 30d, AUDIT_RETENTION 365d,
 * LOCKOUT_MINUTES 30, sessions and two-factor setups at expiry, revoked access tokens 5 minutes after) and rows that must stay, with margins of minutes
 * or more so a slow test run never ages a kept row into a gone one.
 */
export async function seed(app: TestApp): Promise<Seeded> {
  const db = app.db;
  const user = await makeUser(app);
  const client = await makeClient(app);
  const token = async (expires: string, state: 'used' | 'invalidated' | 'notified' | 'unused', sessionId: string | null = null) => {
    const jti = randomUUID();
    await db.query(
      `INSERT INTO sso_tokens (jti, user_id, client_id, username, ip_address, issued_at, expires_at, used_at, invalidated_at, expiry_notified_at, session_id)
       VALUES ($1, $2, $3, $4, '127.0.0.1', now() + $5::interval - interval '1 minute', now() + $5::interval,
               CASE WHEN $6 = 'used' THEN now() + $5::interval - interval '30 seconds' END,
               CASE WHEN $6 = 'invalidated' THEN now() + $5::interval - interval '30 seconds' END,
               CASE WHEN $6 = 'notified' THEN now() + $5::interval + interval '5 seconds' END, $7)`,
      [jti, user.id, client.client_id, user.username, expires, state, sessionId],
    );
    return jti;
  };
  const audit = async (age: string) =>
    String((await db.query<{ id: number }>("INSERT INTO audit_log (at, action, outcome) VALUES (now() - $1::interval, 'test.seed', 'success') RETURNING id", [age])).rows[0].id);
  const webhookId = (await db.query<{ id: number }>(
    // subscribed to an event nothing here causes; its seeded deliveries are never due, so nothing is sent
    "INSERT INTO webhooks (url, events, secret) VALUES ('http://127.0.0.1:9/hook', '{user.2fa_enabled}', 'a-secret') RETURNING id",
  )).rows[0].id;
  const delivery = async (status: 'succeeded' | 'failed' | 'pending', completedAgo: string | null, attempts: number) => {
    const id = randomUUID();
    await db.query(
      `INSERT INTO webhook_deliveries (id, webhook_id, event, data, status, attempts, next_attempt_at, created_at, completed_at)
       VALUES ($1, $2, 'user.2fa_enabled', '{}', $3, $4, now() + interval '1 hour', now() - interval '60 days', now() - $5::interval)`,
      [id, webhookId, status, attempts, completedAgo],
    );
    await db.query(
      `INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, duration_ms)
       SELECT $1, g, now() - interval '59 days', 500, 10 FROM generate_series(1, $2::int) g`,
      [id, attempts],
    );
    return id;
  };
  const login = async (updatedAgo: string, lockedUntil: string | null) => {
    const name = unique('login');
    await db.query(
      `INSERT INTO login_attempts (login, failed_count, locked_until, updated_at)
       VALUES ($1, 2, now() + $2::interval, now() - $3::interval)`,
      [name, lockedUntil, updatedAgo],
    );
    return name;
  };
  const session = async (expiresIn: string) => {
    const sid = unique('sid');
    await db.query("INSERT INTO sessions (sid, sess, expire) VALUES ($1, '{}', now() + $2::interval)", [sid, expiresIn]);
    return sid;
  };

  const revoked = async (expiresIn: string) => {
    const jti = randomUUID();
    await db.query('INSERT INTO revoked_access_tokens (jti, user_id, expires_at) VALUES ($1, $2, now() + $3::interval)', [jti, user.id, expiresIn]);
    return jti;
  };

  const setup = async (expiresIn: string) => {
    const owner = `session:${unique('setup')}`;
    await db.query(
      "INSERT INTO totp_pending (owner, user_id, secret, created_at, expires_at) VALUES ($1, $2, 'JBSWY3DPEHPK3PXP', now() + $3::interval - interval '10 minutes', now() + $3::interval)",
      [owner, user.id, expiresIn]);
    return owner;
  };
  const artefact = async (expiresIn: string) => {
    const pk = `RefreshToken:${randomUUID()}`;
    await db.query(`INSERT INTO oidc_artefacts (pk, model, payload, account_id, expires_at) VALUES ($1, 'RefreshToken', '{}', $2, now() + $3::interval)`, [pk, String(user.id), expiresIn]);
    return pk;
  };
  // a passkey ceremony's challenge (migrations/0026): worthless once expired
  const challenge = async (expiresIn: string) => {
    const value = randomUUID().replaceAll('-', '') + randomUUID().replaceAll('-', '');
    await db.query(
      `INSERT INTO webauthn_challenges (challenge, purpose, created_at, expires_at)
       VALUES ($1, 'authentication', now() + $2::interval - interval '5 minutes', now() + $2::interval)`, [value, expiresIn]);
    return value;
  };

  const gone = {
    sso_tokens: [
      await token('-25 hours', 'used'), await token('-25 hours', 'invalidated'), await token('-25 hours', 'notified'),
      await token('-25 hours', 'used', unique('ended-session')), // its browser session is gone
    ],
    audit_log: [await audit('366 days')],
    webhook_deliveries: [await delivery('succeeded', '31 days', 2), await delivery('failed', '31 days', 4)],
    login_attempts: [await login('31 days', null), await login('35 minutes', '-5 minutes')],
    sessions: [await session('-1 second')],
    revoked_access_tokens: [await revoked('-10 minutes')],
    totp_pending: [await setup('-1 second')],
    oidc_artefacts: [await artefact('-10 minutes')],
    webauthn_challenges: [await challenge('-1 minute')],
  };
  const kept = {
    sso_tokens: [
      await token('-25 hours', 'unused'), // expired unused, its token.expired not yet written
      await token('-20 hours', 'used'), // used, but expired less than 24 hours ago
      await token('1 hour', 'unused'), // still valid
      // past retention, but its browser session lives: a client's logout with it ends that session
      await token('-25 hours', 'used', await session('1 hour')),
    ],
    audit_log: [await audit('364 days')],
    webhook_deliveries: [await delivery('succeeded', '29 days', 1), await delivery('pending', null, 2)],
    // counting toward a lock (two failures, the last 31 minutes or 29 days ago: DESIGN has no window), and locked
    login_attempts: [await login('31 minutes', null), await login('29 days', null), await login('40 minutes', '10 minutes')],
    sessions: [await session('1 hour')],
    // still unexpired, and expired a minute ago (kept five minutes past expiry, for clock skew)
    revoked_access_tokens: [await revoked('10 minutes'), await revoked('-1 minute')],
    totp_pending: [await setup('5 minutes')],
    oidc_artefacts: [await artefact('10 minutes'), await artefact('-1 minute')],
    webauthn_challenges: [await challenge('4 minutes')],
  };
  return { gone, kept };
}

const KEYS: Record<string, [string, string]> = {
  sso_tokens: ['sso_tokens', 'jti::text'],
  audit_log: ['audit_log', 'id::text'],
  webhook_deliveries: ['webhook_deliveries', 'id::text'],
  login_attempts: ['login_attempts', 'login'],
  sessions: ['sessions', 'sid'],
  revoked_access_tokens: ['revoked_access_tokens', 'jti'],
  totp_pending: ['totp_pending', 'owner'],
  oidc_artefacts: ['oidc_artefacts', 'pk'],
  webauthn_challenges: ['webauthn_challenges', 'challenge'],
};

/** Which of `keys` (per table) are still in the database, per table. */
export async function present(db: Queryable, keys: Record<string, string[]>): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const [name, wanted] of Object.entries(keys)) {
    const [table, key] = KEYS[name];
    const r = await db.query<{ k: string }>(`SELECT ${key} AS k FROM ${table} WHERE ${key} = ANY($1::text[])`, [wanted]);
    out[name] = r.rows.map((row) => row.k).sort();
  }
  return out;
}

/** The same keys, sorted, as `present` answers them. */
export function sorted(keys: Record<string, string[]>): Record<string, string[]> {
  return Object.fromEntries(Object.entries(keys).map(([k, v]) => [k, [...v].sort()]));
}

/** Attempts logged for these deliveries. */
export async function attemptCount(db: Queryable, deliveryIds: string[]): Promise<number> {
  const r = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook_attempts WHERE delivery_id = ANY($1::uuid[])', [deliveryIds]);
  return r.rows[0].n;
}
