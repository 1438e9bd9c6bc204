-- Every change of a client row is announced on the channel auth_client_changed, payload the
-- client_id, at commit: instances that keep client records in memory (src/clients/cache.ts)
-- drop that record at once, whoever made the change (the API, the CLI, the panel, a seed or
-- psql). A TRUNCATE announces an empty payload: drop every record.

CREATE FUNCTION clients_notify_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    PERFORM pg_notify('auth_client_changed', '');
    RETURN NULL;
  END IF;
  IF TG_OP <> 'INSERT' THEN
    PERFORM pg_notify('auth_client_changed', OLD.client_id);
  END IF;
  IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.client_id IS DISTINCT FROM OLD.client_id) THEN
    PERFORM pg_notify('auth_client_changed', NEW.client_id);
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER clients_notify_change AFTER INSERT OR UPDATE OR DELETE ON clients
  FOR EACH ROW EXECUTE FUNCTION clients_notify_change();
CREATE TRIGGER clients_notify_truncate AFTER TRUNCATE ON clients
  FOR EACH STATEMENT EXECUTE FUNCTION clients_notify_change();
