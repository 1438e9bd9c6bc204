-- Issued tokens keep their user and client by triggers on the other side instead of foreign
-- keys (docs/performance.md, "Foreign keys off the token issue").
--
-- Why: a foreign key is checked for every inserted row by a query that locks the referenced
-- row FOR KEY SHARE. Every token of a client system locks that client's one row, so the
-- concurrent issue statements of a busy client share the lock through a multixact; measured
-- with pgbench, the two checks were a quarter of the database's time per issued token (20 to
-- 27 µs of 80 to 110). The statements that write tokens read the user and the client in the
-- same statement (src/sso/queries.ts), so a token is only written for a user and a client
-- that exist.
--
-- What the keys did and what does it now:
-- - ON DELETE CASCADE: deleting users or clients (psql, a seed file) deletes their tokens, in
--   the same statement, by the triggers below (one pass over the tokens per statement, where
--   the cascade made one per deleted row).
-- - TRUNCATE users or clients CASCADE emptied the tokens too: so do the TRUNCATE triggers
--   (every token has a user and a client).
-- - No token for a missing user or client: the writing statement's own read. A user or client
--   deleted by a transaction that commits while a token for it is being written leaves that
--   token behind; it is worthless (validation joins the active user and needs the client's
--   credentials), and is swept and pruned as any other.
-- - A client_id renamed while tokens named the old one was refused; now those tokens stay
--   under the old name and cannot be validated by the renamed client (a token names its
--   client in its claims too). Dashboard links still refuse the rename by their own key.

ALTER TABLE sso_tokens
  DROP CONSTRAINT IF EXISTS sso_tokens_user_id_fkey,
  DROP CONSTRAINT IF EXISTS sso_tokens_client_id_fkey;

CREATE FUNCTION sso_tokens_delete_with_users() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM sso_tokens t USING gone g WHERE t.user_id = g.id;
  RETURN NULL;
END $$;

CREATE FUNCTION sso_tokens_delete_with_clients() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM sso_tokens t USING gone g WHERE t.client_id = g.client_id;
  RETURN NULL;
END $$;

CREATE TRIGGER users_delete_tokens AFTER DELETE ON users
  REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION sso_tokens_delete_with_users();
CREATE TRIGGER clients_delete_tokens AFTER DELETE ON clients
  REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION sso_tokens_delete_with_clients();

CREATE FUNCTION sso_tokens_truncate_with_owners() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  TRUNCATE sso_tokens;
  RETURN NULL;
END $$;

CREATE TRIGGER users_truncate_tokens AFTER TRUNCATE ON users
  FOR EACH STATEMENT EXECUTE FUNCTION sso_tokens_truncate_with_owners();
CREATE TRIGGER clients_truncate_tokens AFTER TRUNCATE ON clients
  FOR EACH STATEMENT EXECUTE FUNCTION sso_tokens_truncate_with_owners();
