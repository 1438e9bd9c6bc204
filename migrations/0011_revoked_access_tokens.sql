-- Access tokens (POST /api/login) signed out one by one: POST /api/auth/logout with a bearer
-- token revokes that token, not the user's others. A row is needed only until the token
-- expires (a later one is refused by its signature's exp anyway), so the pruner deletes
-- expired rows at once, walking expires_at.
CREATE TABLE IF NOT EXISTS revoked_access_tokens (
  jti text PRIMARY KEY,
  user_id integer NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  expires_at timestamptz NOT NULL,
  revoked_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS revoked_access_tokens_expires ON revoked_access_tokens (expires_at);
CREATE INDEX IF NOT EXISTS revoked_access_tokens_user ON revoked_access_tokens (user_id);
