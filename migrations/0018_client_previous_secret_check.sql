-- A client's previous secret (0006), like its secret, is stored as the hex SHA-256 of the
-- secret, whoever writes the row. Until now only secret_hash was checked: a seed file that put
-- the old secret itself in previous_secret_hash (an easy slip, the column sits beside the
-- documented ones) was stored as given, a plain secret in the database and its backups, and
-- the old secret stopped working at once, in what the administrator took for its grace.
--
-- Now a previous secret that is not 64 hex digits is refused, with a message that does not
-- repeat the value (it may be a secret), by a trigger of its own that runs before
-- clients_before_write (triggers of one event run in name order), and by a constraint.

CREATE FUNCTION clients_check_previous_secret() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  NEW.previous_secret_hash := lower(NEW.previous_secret_hash);
  IF NEW.previous_secret_hash !~ '^[0-9a-f]{64}$' THEN
    RAISE EXCEPTION 'previous_secret_hash of client % is not the hex SHA-256 of a secret (64 characters 0-9a-f); store the hash, never the secret itself', NEW.client_id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER clients_before_previous_secret BEFORE INSERT OR UPDATE ON clients
  FOR EACH ROW EXECUTE FUNCTION clients_check_previous_secret();

-- Rows written before: a hash in capitals is the same hash; anything else never matched any
-- secret, and is removed with its expiry (the clients trigger audits it, via: migration).
SELECT set_config('auth.actor', '{"via": "migration", "reason": "previous_secret_hash_refused"}', true);
UPDATE clients SET previous_secret_hash = lower(previous_secret_hash)
 WHERE previous_secret_hash ~ '^[0-9A-Fa-f]{64}$' AND previous_secret_hash <> lower(previous_secret_hash);
UPDATE clients SET previous_secret_hash = NULL, previous_secret_expires_at = NULL
 WHERE previous_secret_hash !~ '^[0-9a-f]{64}$';
SELECT set_config('auth.actor', '', true);

ALTER TABLE clients ADD CONSTRAINT clients_previous_secret_hash_valid
  CHECK (previous_secret_hash IS NULL OR previous_secret_hash ~ '^[0-9a-f]{64}$');
