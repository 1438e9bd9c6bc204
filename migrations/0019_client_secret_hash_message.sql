-- A seed or psql that put a client's secret itself in secret_hash (the easy slip 0018 guards
-- against for previous_secret_hash) was refused by clients_before_write with a message that
-- repeated the value: the plain secret went to the terminal, the CI log and the server log.
--
-- Now a trigger of its own, which runs before clients_before_write (triggers of one event run in
-- name order), refuses it first with a message that names the column and the client only.
-- What it accepts, clients_before_write accepts (a hash in capitals is lower-cased there).

CREATE FUNCTION clients_check_secret_hash() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF NEW.secret_hash IS NULL OR NEW.secret_hash !~ '^[0-9A-Fa-f]{64}$' THEN
    RAISE EXCEPTION 'secret_hash of client % is not the hex SHA-256 of a secret (64 characters 0-9a-f); store the hash, never the secret itself', NEW.client_id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER clients_before_secret_hash BEFORE INSERT OR UPDATE ON clients
  FOR EACH ROW EXECUTE FUNCTION clients_check_secret_hash();
