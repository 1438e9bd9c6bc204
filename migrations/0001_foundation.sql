-- Users. username is stored normalized (trimmed, NFKC, lower-cased): unique case-insensitively.
CREATE TABLE users (
  id              integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  username        text NOT NULL UNIQUE,
  email           text NOT NULL,
  full_name       text NOT NULL DEFAULT '',
  role            text NOT NULL DEFAULT 'user',
  password_hash   text NOT NULL,
  active          boolean NOT NULL DEFAULT true,
  totp_secret     text,
  totp_enabled    boolean NOT NULL DEFAULT false,
  -- last accepted TOTP time step: a code is accepted once
  totp_last_step  bigint,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);

-- Failed-login counters, keyed by normalized login name whether or not such a user exists,
-- so unknown names behave exactly like known ones.
CREATE TABLE login_attempts (
  login         text PRIMARY KEY,
  failed_count  integer NOT NULL DEFAULT 0,
  locked_until  timestamptz,
  updated_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE recovery_codes (
  id         integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  user_id    integer NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  code_hash  text NOT NULL,
  used_at    timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX recovery_codes_user ON recovery_codes (user_id) WHERE used_at IS NULL;

-- Client systems. The secret is kept only as a SHA-256 hash plus its last 4 characters for the mask.
CREATE TABLE clients (
  client_id     text PRIMARY KEY,
  client_name   text NOT NULL,
  secret_hash   text NOT NULL,
  secret_last4  text NOT NULL,
  callback_url  text NOT NULL,
  allowed_ips   text[] NOT NULL DEFAULT '{}',
  active        boolean NOT NULL DEFAULT true,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now()
);

-- Issued SSO tokens: the single-use and invalidation bookkeeping (the JWT itself is never stored).
CREATE TABLE sso_tokens (
  jti                 uuid PRIMARY KEY,
  user_id             integer NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  client_id           text NOT NULL REFERENCES clients(client_id) ON DELETE CASCADE,
  username            text NOT NULL,
  ip_address          text NOT NULL,
  issued_at           timestamptz NOT NULL,
  expires_at          timestamptz NOT NULL,
  used_at             timestamptz,
  invalidated_at      timestamptz,
  expiry_notified_at  timestamptz
);
CREATE INDEX sso_tokens_unused_by_user ON sso_tokens (user_id, client_id)
  WHERE used_at IS NULL AND invalidated_at IS NULL;
CREATE INDEX sso_tokens_expiry_sweep ON sso_tokens (expires_at)
  WHERE used_at IS NULL AND invalidated_at IS NULL AND expiry_notified_at IS NULL;

-- Usernames a user has at client systems, for the dashboard's one-click sign-in.
CREATE TABLE user_client_links (
  user_id            integer NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  client_id          text NOT NULL REFERENCES clients(client_id) ON DELETE CASCADE,
  external_username  text NOT NULL,
  created_at         timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, client_id)
);

-- Browser and API sessions (express-session store), shared by every instance.
CREATE TABLE sessions (
  sid     text PRIMARY KEY,
  sess    jsonb NOT NULL,
  expire  timestamptz NOT NULL
);
CREATE INDEX sessions_expire ON sessions (expire);

CREATE TABLE audit_log (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at          timestamptz NOT NULL DEFAULT now(),
  action      text NOT NULL,
  outcome     text NOT NULL,
  user_id     integer,
  username    text,
  client_id   text,
  ip_address  text,
  user_agent  text,
  details     jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX audit_log_user ON audit_log (user_id, id);
CREATE INDEX audit_log_client ON audit_log (client_id, id);
CREATE INDEX audit_log_action ON audit_log (action, id);

-- Webhooks and their durable outbox. The secret must be usable for signing, so it is stored
-- as given and never returned by the API.
CREATE TABLE webhooks (
  id          integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  url         text NOT NULL,
  events      text[] NOT NULL,
  secret      text NOT NULL,
  active      boolean NOT NULL DEFAULT true,
  disabled_reason text,
  created_by  integer REFERENCES users(id) ON DELETE SET NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);

-- One row per (event, webhook): written in the transaction that caused the event.
CREATE TABLE webhook_deliveries (
  id               uuid PRIMARY KEY,
  webhook_id       integer NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
  event            text NOT NULL,
  data             jsonb NOT NULL,
  status           text NOT NULL DEFAULT 'pending',  -- pending | succeeded | failed
  attempts         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  locked_until     timestamptz,
  last_status_code integer,
  last_error       text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  completed_at     timestamptz
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, created_at);

CREATE TABLE webhook_attempts (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  delivery_id  uuid NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
  attempt      integer NOT NULL,
  at           timestamptz NOT NULL DEFAULT now(),
  status_code  integer,
  error        text,
  duration_ms  integer NOT NULL
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, attempt);
