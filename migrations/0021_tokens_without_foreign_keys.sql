-- Issued tokens keep their user and client by triggers on the other side instead of foreign
-- keys (docs/performance.md, "Foreign keys off the token issue").
--
-- Why: a foreign key is checked for every inserted row by a query that locks the referenced
-- row FOR KEY SHARE. Every token of a client system locks that client's one row, so the
-- concurrent issue statements of a busy client share the lock through a multixact; measured
-- with pgbench, the two checks were a quarter of the database's time per issued token (20 to
-- 27 µs of 80 to 110). The server-to-server issue, the hot path, reads the user and the
-- client in the statement that writes the token (src/sso/queries.ts); the other issues hold
-- them as the keys did (below).
--
-- What the keys did and what does it now:
-- - ON DELETE CASCADE: deleting users or clients (psql, a seed file) deletes their tokens, in
--   the same statement, by the triggers below (one pass over the tokens per statement, where
--   the cascade made one per deleted row).
-- - TRUNCATE users or clients CASCADE emptied the tokens too: so do the TRUNCATE triggers
--   (every token has a user and a client).
-- - No token for a missing user or client: a browser's sign-in, which read them long before
--   (bcrypt between), holds both FOR KEY SHARE while it writes its token, as the keys did
--   (src/sso/queries.ts, holdTokenOwners), so a delete waits for it and takes the token along.
--   The server-to-server issue reads both in its own statement, unlocked: a delete or rename
--   in a transaction it cannot see yet leaves its token behind under the old id. So a token
--   keeps the creation time of the client it was issued to (client_created_at, below), and
--   validation and a client's logout accept it only from the client created then: one
--   registered again under the id later never gets it. Such a token is swept and pruned as
--   any other.
-- - A client_id changed while tokens name the old one is refused (the key's ON UPDATE NO
--   ACTION), by the rename trigger below: a client registered later under the old id must
--   not inherit them.

-- Each function keeps the search_path it was created with (as 0017 made the clients'
-- functions do): a seed file made from pg_dump empties it and names public.clients.
ALTER TABLE sso_tokens
  DROP CONSTRAINT IF EXISTS sso_tokens_user_id_fkey,
  DROP CONSTRAINT IF EXISTS sso_tokens_client_id_fkey,
  -- null for tokens written before: those are judged by the client's id alone
  ADD COLUMN client_created_at timestamptz;

CREATE FUNCTION sso_tokens_delete_with_users() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  DELETE FROM sso_tokens t USING gone g WHERE t.user_id = g.id;
  RETURN NULL;
END $$;

CREATE FUNCTION sso_tokens_delete_with_clients() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  DELETE FROM sso_tokens t USING gone g WHERE t.client_id = g.client_id;
  RETURN NULL;
END $$;

CREATE TRIGGER users_delete_tokens AFTER DELETE ON users
  REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION sso_tokens_delete_with_users();
CREATE TRIGGER clients_delete_tokens AFTER DELETE ON clients
  REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION sso_tokens_delete_with_clients();

CREATE FUNCTION sso_tokens_truncate_with_owners() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  TRUNCATE sso_tokens;
  RETURN NULL;
END $$;

CREATE TRIGGER users_truncate_tokens AFTER TRUNCATE ON users
  FOR EACH STATEMENT EXECUTE FUNCTION sso_tokens_truncate_with_owners();
CREATE TRIGGER clients_truncate_tokens AFTER TRUNCATE ON clients
  FOR EACH STATEMENT EXECUTE FUNCTION sso_tokens_truncate_with_owners();

CREATE FUNCTION clients_keep_token_names() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF NEW.client_id IS DISTINCT FROM OLD.client_id AND EXISTS (SELECT 1 FROM sso_tokens WHERE client_id = OLD.client_id) THEN
    RAISE EXCEPTION 'client % has issued tokens (kept for TOKEN_RETENTION): its client_id cannot change; register a new client instead', OLD.client_id
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER clients_rename_tokens AFTER UPDATE OF client_id ON clients
  FOR EACH ROW EXECUTE FUNCTION clients_keep_token_names();
