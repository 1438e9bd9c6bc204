-- Passwords for life: change, reset by email, set by an administrator, sign out everywhere.

-- An administrator can require a new password at the next sign-in.
ALTER TABLE users ADD COLUMN must_change_password boolean NOT NULL DEFAULT false;
-- When the password last changed (or the user signed out everywhere): access tokens issued
-- before it are refused.
ALTER TABLE users ADD COLUMN password_changed_at timestamptz;

-- Password reset links. Only the SHA-256 of the random token is kept; a row is used once
-- (used_at set in one statement), and a newer request or a password change deletes the rest.
CREATE TABLE password_resets (
  id          integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  user_id     integer NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  token_hash  text NOT NULL UNIQUE,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  used_at     timestamptz
);
CREATE INDEX password_resets_user ON password_resets (user_id);

-- Sessions by user (for "your sessions" and "sign out everywhere"): the user id is read from
-- the session document itself, so the session store needs no change to keep it; last_seen_at
-- is moved forward at most once a minute by the store's reads.
ALTER TABLE sessions ADD COLUMN user_id integer GENERATED ALWAYS AS ((sess ->> 'userId')::integer) STORED;
ALTER TABLE sessions ADD COLUMN created_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE sessions ADD COLUMN last_seen_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX sessions_user ON sessions (user_id) WHERE user_id IS NOT NULL;
