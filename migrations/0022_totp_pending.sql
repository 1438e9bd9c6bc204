-- A two-factor setup not yet confirmed belongs to the session or access token that started
-- it (`owner`: 'session:<sid>' or 'token:<jti>'), and lasts until `expires_at` (ten minutes,
-- src/auth/two-factor.ts). Only that owner is shown its secret and may turn it on; a password
-- change, a reset and a sign-out everywhere delete the user's rows, and the retention pruner
-- deletes expired ones. Before, the pending secret sat in users.totp_secret with no owner and
-- no end: anyone holding the password or a session could plant one, the owner's page showed it
-- as theirs, and their enabling turned it on.
CREATE TABLE totp_pending (
  owner       text PRIMARY KEY CHECK (owner ~ '^(session|token):[A-Za-z0-9._~+/=-]{1,200}$'),
  user_id     integer NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  secret      text NOT NULL CHECK (secret ~ '^[A-Z2-7]{16,128}$'),
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  CHECK (expires_at > created_at AND expires_at <= created_at + interval '1 day')
);
CREATE INDEX totp_pending_by_user ON totp_pending (user_id);
CREATE INDEX totp_pending_by_expiry ON totp_pending (expires_at);

-- The pending secrets of the old scheme have no owner: they are dropped (whoever started one
-- starts again), and users.totp_secret holds a secret only while two-factor is on.
UPDATE users SET totp_secret = NULL, totp_last_step = NULL WHERE NOT totp_enabled AND (totp_secret IS NOT NULL OR totp_last_step IS NOT NULL);
ALTER TABLE users ADD CONSTRAINT users_totp_secret_only_when_enabled CHECK (totp_enabled OR totp_secret IS NULL);
