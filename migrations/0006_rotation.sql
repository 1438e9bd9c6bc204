-- Client secret rotation with a grace period: the secret a rotation replaced, hashed like
-- the current one (hex SHA-256), and until when it is still accepted. Both NULL when there
-- is none; both default to NULL, so plain SQL inserts of clients need not name them.
ALTER TABLE clients ADD COLUMN previous_secret_hash text;
ALTER TABLE clients ADD COLUMN previous_secret_expires_at timestamptz;
ALTER TABLE clients ADD CONSTRAINT clients_previous_secret_complete
  CHECK ((previous_secret_hash IS NULL) = (previous_secret_expires_at IS NULL));
