/**
 * Every table and column the service's SQL uses, what it must be allowed to do with each
 * table, and the triggers it relies on. The start-up check (schema-check.ts) compares the database with this list after
 * migrating, and /readyz does on every probe: a table dropped by hand or a database user that
 * may only read stops the start with one line naming what is missing, instead of 500s later.
 *
 * A migration that adds a table or a column the code uses adds it here too;
 * test/db/schema-check.test.ts fails while a migrated table is missing from this list.
 */

/** Privileges of a table the service reads and changes. */
const READ_WRITE = ['SELECT', 'INSERT', 'UPDATE', 'DELETE'] as const;

export type TablePrivilege = 'SELECT' | 'INSERT' | 'UPDATE' | 'DELETE';

export interface RequiredTable {
  columns: readonly string[];
  privileges: readonly TablePrivilege[];
  /**
   * Triggers the service relies on, which must exist and be enabled: the checks, audit
   * entries and change announcements of client rows are made by the database itself, for
   * every writer (seed files, psql), so without them a change goes unchecked or unaudited.
   */
  triggers?: readonly string[];
  /**
   * Column sets that must be unique (a primary key or a valid unique index, not partial): the
   * targets of the service's ON CONFLICT clauses, and the keys single use and one holder per
   * name rest on. A restore whose indexes failed, or a dropped constraint, would otherwise
   * start a service whose upserts fail (500s) or whose rules quietly stop holding.
   */
  unique?: readonly (readonly string[])[];
  /**
   * Column sets that must be unique among the rows a predicate picks: a valid unique index with
   * exactly those columns and that predicate, `where` written as PostgreSQL prints it
   * (pg_get_expr). One active link per name at a client (migrations/0029) rests on one.
   */
  partialUnique?: readonly { columns: readonly string[]; where: string }[];
}

export const REQUIRED_SCHEMA: Readonly<Record<string, RequiredTable>> = {
  schema_migrations: { columns: ['name', 'applied_at', 'checksum'], privileges: ['SELECT'] },
  users: {
    columns: ['id', 'username', 'email', 'full_name', 'role', 'password_hash', 'active', 'totp_secret', 'totp_enabled', 'totp_last_step', 'created_at', 'updated_at',
      'must_change_password', 'password_changed_at'],
    privileges: READ_WRITE,
    // migrations/0021: a user's tokens go with it (sso_tokens has no foreign keys)
    triggers: ['users_delete_tokens', 'users_truncate_tokens'],
    unique: [['id'], ['username']],
  },
  login_attempts: { columns: ['login', 'failed_count', 'locked_until', 'updated_at'], privileges: READ_WRITE, unique: [['login']] },
  recovery_codes: { columns: ['id', 'user_id', 'code_hash', 'used_at', 'created_at'], privileges: READ_WRITE },
  clients: {
    columns: ['client_id', 'client_name', 'secret_hash', 'secret_last4', 'callback_url', 'allowed_ips', 'active', 'created_at', 'updated_at',
      'previous_secret_hash', 'previous_secret_expires_at', 'logo_url', 'initiate_login_uri', 'redirect_uris', 'post_logout_redirect_uris', 'public', 'backchannel_logout_uri',
      'allow_groups', 'allow_roles', 'listed'],
    privileges: READ_WRITE,
    // migrations/0002_clients_as_sql.sql (checks, audit, client.registered), 0010 (cache announcements), 0018 and 0019 (the hashes, refused without
    // repeating them), 0021 (a client's tokens go with it, and keep its name), 0023 (the initiate-login URL), 0027 (the access rule)
    triggers: ['clients_before_write', 'clients_after_write', 'clients_notify_change', 'clients_notify_truncate', 'clients_before_previous_secret', 'clients_before_secret_hash',
      'clients_delete_tokens', 'clients_truncate_tokens', 'clients_rename_tokens', 'clients_before_initiate_login_uri',
      // 0024: the OpenID Connect columns' checks and audit
      'clients_before_write_oidc', 'clients_after_write_oidc',
      // 0027: the access rule checked and audited
      'clients_before_write_access', 'clients_audit_access'],
    unique: [['client_id']],
  },
  // migrations/0027: groups (a group a client's rule names is kept) and memberships
  groups: { columns: ['id', 'name', 'created_at'], privileges: READ_WRITE, triggers: ['groups_keep_named'], unique: [['id'], ['name']] },
  user_groups: { columns: ['user_id', 'group_id', 'added_at'], privileges: READ_WRITE, unique: [['user_id', 'group_id']] },
  sso_tokens: {
    columns: ['jti', 'user_id', 'client_id', 'username', 'ip_address', 'issued_at', 'expires_at', 'used_at', 'invalidated_at', 'expiry_notified_at', 'session_id',
      'client_created_at'],
    privileges: READ_WRITE,
    unique: [['jti']],
  },
  user_client_links: {
    columns: ['user_id', 'client_id', 'external_username', 'created_at', 'status', 'confirmed_at', 'confirmed_by', 'username_key'],
    privileges: READ_WRITE,
    unique: [['user_id', 'client_id']],
    partialUnique: [{ columns: ['client_id', 'username_key'], where: "(status = 'active'::text)" }],
  },
  sessions: { columns: ['sid', 'sess', 'expire', 'user_id', 'created_at', 'last_seen_at'], privileges: READ_WRITE, unique: [['sid']] },
  revoked_access_tokens: { columns: ['jti', 'user_id', 'expires_at', 'revoked_at'], privileges: READ_WRITE, unique: [['jti']] },
  totp_pending: { columns: ['owner', 'user_id', 'secret', 'created_at', 'expires_at'], privileges: READ_WRITE, unique: [['owner']] },
  password_resets: { columns: ['id', 'user_id', 'token_hash', 'created_at', 'expires_at', 'used_at'], privileges: READ_WRITE },
  // the audit log is appended to and read; an operator may revoke UPDATE and DELETE on it
  audit_log: {
    columns: ['id', 'at', 'action', 'outcome', 'user_id', 'username', 'client_id', 'ip_address', 'user_agent', 'details'],
    privileges: ['SELECT', 'INSERT'],
    // migrations/0028: during a seed run, entries only from triggers, under the run's actor
    triggers: ['audit_log_seed_guard'],
  },
  webhooks: { columns: ['id', 'url', 'events', 'secret', 'active', 'disabled_reason', 'created_by', 'created_at'], privileges: READ_WRITE },
  webhook_deliveries: {
    columns: ['id', 'webhook_id', 'event', 'data', 'status', 'attempts', 'next_attempt_at', 'locked_until', 'last_status_code', 'last_error', 'created_at', 'completed_at'],
    privileges: READ_WRITE,
  },
  // migrations/0025: what the OpenID Connect provider keeps (src/oidc/adapter.ts)
  oidc_artefacts: {
    columns: ['pk', 'model', 'payload', 'grant_id', 'uid', 'user_code', 'account_id', 'expires_at', 'consumed_at'],
    privileges: READ_WRITE,
    unique: [['pk']],
  },
  webhook_attempts: { columns: ['id', 'delivery_id', 'attempt', 'at', 'status_code', 'error', 'duration_ms'], privileges: READ_WRITE },
  // migrations/0026: passkeys and the single-use challenges of their ceremonies
  passkeys: {
    columns: ['id', 'user_id', 'credential_id', 'public_key', 'counter', 'transports', 'name', 'created_at', 'last_used_at'],
    privileges: READ_WRITE,
    unique: [['id'], ['credential_id']],
  },
  webauthn_challenges: { columns: ['challenge', 'purpose', 'user_id', 'created_at', 'expires_at'], privileges: READ_WRITE, unique: [['challenge']] },
};
