-- A client system may register an initiate-login URL (OpenID Connect's "third-party initiated
-- login", initiate_login_uri): the dashboard's one-click sign-in sends the browser there, and the
-- client starts its own sign-in, with its own state (docs/dashboard-links.md, docs/sdk.md).
-- Optional; when set, the same rules as callback_url: an absolute http(s) URL with a host, no
-- credentials, no fragment, printable ASCII, at most 2048 characters. Like every column of the
-- clients table it is checked by the database, whoever writes the row (docs/clients-as-sql.md).
ALTER TABLE clients ADD COLUMN initiate_login_uri text;

ALTER TABLE clients ADD CONSTRAINT clients_initiate_login_uri_valid
  CHECK (initiate_login_uri IS NULL OR client_callback_url_is_valid(initiate_login_uri));

-- The CHECK above only names the constraint; this names the client and the value (a URL holds
-- no secret), as clients_before_write does for callback_url. '' is refused too: NULL is "none".
CREATE FUNCTION clients_check_initiate_login_uri() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF NEW.initiate_login_uri IS NOT NULL AND NOT client_callback_url_is_valid(NEW.initiate_login_uri) THEN
    RAISE EXCEPTION 'initiate_login_uri "%" of client % is not an absolute http(s) URL (with a host, no credentials, no fragment, no spaces); NULL for none', NEW.initiate_login_uri, NEW.client_id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER clients_before_initiate_login_uri BEFORE INSERT OR UPDATE ON clients
  FOR EACH ROW EXECUTE FUNCTION clients_check_initiate_login_uri();

-- The audit entry of a change names a new initiate-login URL (or 'removed'). The rest of the
-- function is 0017's, unchanged (CREATE OR REPLACE needs the whole body, and resets the settings
-- 0017 gave it: its search_path is set again here).
CREATE OR REPLACE FUNCTION clients_after_write() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  actor constant jsonb := clients_change_actor();
  details constant jsonb := actor - 'ip_address' - 'user_agent';
  changed jsonb;
  previous_until jsonb;
  rotation boolean;
BEGIN
  IF TG_OP = 'DELETE' THEN
    INSERT INTO audit_log (action, outcome, client_id, ip_address, user_agent, details)
    VALUES ('client.delete', 'success', OLD.client_id, actor->>'ip_address', actor->>'user_agent', details);
    RETURN NULL;
  END IF;
  previous_until := to_jsonb(to_char(NEW.previous_secret_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'));
  IF TG_OP = 'INSERT' THEN
    -- a row written with a previous secret already (a restore, a seed) says so, and until when
    INSERT INTO audit_log (action, outcome, client_id, ip_address, user_agent, details)
    VALUES ('client.create', 'success', NEW.client_id, actor->>'ip_address', actor->>'user_agent',
            details || CASE WHEN NEW.previous_secret_hash IS NOT NULL
                         THEN jsonb_build_object('previous_secret', 'set', 'previous_secret_expires_at', previous_until)
                         ELSE '{}'::jsonb END);
    INSERT INTO webhook_deliveries (id, webhook_id, event, data)
    SELECT gen_random_uuid(), w.id, 'client.registered', jsonb_build_object('client_id', NEW.client_id, 'client_name', NEW.client_name)
    FROM webhooks w WHERE w.active AND 'client.registered' = ANY (w.events)
    ORDER BY w.id
    -- as every event's deliveries (src/webhooks/event-queries.ts deliveryRows): a webhook
    -- being deleted or turned off is waited for, then seen as it committed
    FOR KEY SHARE OF w;
    RETURN NULL;
  END IF;
  -- what updateClientSecret (src/clients/queries.ts) does: the secret replaced, and the previous
  -- secret either the one replaced or none. Anything else done to the previous secret is named.
  rotation := NEW.secret_hash IS DISTINCT FROM OLD.secret_hash
    AND (NEW.previous_secret_hash IS NULL OR NEW.previous_secret_hash = OLD.secret_hash);
  changed := jsonb_strip_nulls(jsonb_build_object(
    'client_id', CASE WHEN NEW.client_id IS DISTINCT FROM OLD.client_id THEN to_jsonb(NEW.client_id) END,
    'client_name', CASE WHEN NEW.client_name IS DISTINCT FROM OLD.client_name THEN to_jsonb(NEW.client_name) END,
    'callback_url', CASE WHEN NEW.callback_url IS DISTINCT FROM OLD.callback_url THEN to_jsonb(NEW.callback_url) END,
    'allowed_ips', CASE WHEN NEW.allowed_ips IS DISTINCT FROM OLD.allowed_ips THEN to_jsonb(NEW.allowed_ips) END,
    'active', CASE WHEN NEW.active IS DISTINCT FROM OLD.active THEN to_jsonb(NEW.active) END,
    'initiate_login_uri', CASE WHEN NEW.initiate_login_uri IS DISTINCT FROM OLD.initiate_login_uri THEN
      coalesce(to_jsonb(NEW.initiate_login_uri), to_jsonb('removed'::text)) END,
    -- a data: logo can be kilobytes: the log names the change, not the image
    'logo_url', CASE WHEN NEW.logo_url IS DISTINCT FROM OLD.logo_url THEN
      CASE WHEN NEW.logo_url IS NULL THEN to_jsonb('removed'::text)
           WHEN NEW.logo_url LIKE 'data:%' THEN to_jsonb('data: image, ' || length(NEW.logo_url) || ' characters')
           ELSE to_jsonb(NEW.logo_url) END END,
    'secret', CASE WHEN NEW.secret_hash IS DISTINCT FROM OLD.secret_hash THEN to_jsonb('replaced'::text) END,
    -- a second working secret: what happened to it, never its hash (the expiry is in the details)
    'previous_secret', CASE WHEN NOT rotation AND (NEW.previous_secret_hash, NEW.previous_secret_expires_at)
                                 IS DISTINCT FROM (OLD.previous_secret_hash, OLD.previous_secret_expires_at) THEN
      CASE WHEN NEW.previous_secret_hash IS NULL THEN to_jsonb('cleared'::text)
           WHEN NEW.previous_secret_hash IS DISTINCT FROM OLD.previous_secret_hash THEN to_jsonb('set'::text)
           ELSE to_jsonb('expiry changed'::text) END
      -- the secret replaced while an older one is still accepted: the replaced one stops now,
      -- the older one goes on (not a rotation, which keeps the one it replaces)
      WHEN NOT rotation AND NEW.secret_hash IS DISTINCT FROM OLD.secret_hash THEN to_jsonb('older one kept'::text) END));
  IF changed = '{}'::jsonb THEN
    RETURN NULL; -- re-applied unchanged: nothing happened
  END IF;
  INSERT INTO audit_log (action, outcome, client_id, ip_address, user_agent, details)
  VALUES (CASE WHEN changed = '{"secret": "replaced"}'::jsonb THEN 'client.rotate_secret' ELSE 'client.update' END,
          'success', NEW.client_id, actor->>'ip_address', actor->>'user_agent',
          details || jsonb_build_object('changed', changed)
            -- until when the previous secret is still accepted (null: not at all)
            || CASE WHEN changed ?| ARRAY['secret', 'previous_secret']
                 THEN jsonb_build_object('previous_secret_expires_at', previous_until) ELSE '{}'::jsonb END);
  RETURN NULL;
END $$;
