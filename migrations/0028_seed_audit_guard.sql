-- Audit entries of a seed run come only from the clients table's triggers, with the run's own
-- actor (docs/clients-as-code.md, "Seeds cannot forge audit entries"). A seed file ran with the
-- service's rights: it could INSERT a client.* entry naming any user, address and actor (a
-- client.delete for a client that still exists), or set auth.actor itself so that the triggers'
-- own entries named someone else.
--
-- While a seed run is under way in this session (the runner's temporary table seed_run exists:
-- guardSeedCommit in src/seeds/queries.ts creates it; src/seeds/run-queries.ts refuses a file
-- that drops, recreates or writes it), an audit entry is accepted only
--   * from inside a trigger (pg_trigger_depth() > 1): a statement of the file, a DO block or a
--     rule writes at depth 1; the runner refuses a file that creates or replaces a trigger or a
--     function, so the only triggers are the schema's own;
--   * while auth.actor is the run's own (the actor the runner wrote into seed_run for this file).
-- Enabled ALWAYS: it fires whatever session_replication_role says.
CREATE FUNCTION audit_log_seed_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  run_actor jsonb;
BEGIN
  IF to_regclass('pg_temp.seed_run') IS NULL THEN
    RETURN NEW; -- not a seed run: the service, migrations and psql write as before
  END IF;
  IF pg_trigger_depth() < 2 THEN
    RAISE EXCEPTION 'a seed file may not write audit entries (here % of client %): they come from the clients table''s triggers, with the run''s own actor',
      NEW.action, coalesce(NEW.client_id, 'none')
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  EXECUTE 'SELECT actor FROM pg_temp.seed_run' INTO run_actor;
  IF clients_change_actor() IS DISTINCT FROM run_actor THEN
    RAISE EXCEPTION 'a seed file may not set auth.actor (the audit entries of a seed run name the run''s own actor)'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER audit_log_seed_guard BEFORE INSERT ON audit_log
  FOR EACH ROW EXECUTE FUNCTION audit_log_seed_guard();
ALTER TABLE audit_log ENABLE ALWAYS TRIGGER audit_log_seed_guard;
