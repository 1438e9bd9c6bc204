-- The previous secret of a rotation (0006) is a second working secret, so a change of it is an
-- admin change like any other, whoever makes it: 0009 compared neither previous_secret_hash nor
-- previous_secret_expires_at, so an UPDATE by SQL could give a client an extra secret, valid
-- for any length of time, with no audit entry and updated_at unmoved.
--
-- Now a change of either column moves updated_at and is audited: a rotation by the service
-- (the secret replaced, the previous one the replaced secret or none) stays client.rotate_secret
-- as before; any other change of the previous secret is a client.update whose `changed` says
-- `previous_secret`: set, expiry changed or cleared, with previous_secret_expires_at in the
-- details. The hashes never go into the log. A grace longer than the 30 days the API and the
-- CLI allow (MAX_GRACE_SECONDS in src/clients/service.ts) is refused here too.

CREATE OR REPLACE FUNCTION clients_before_write() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  entry text;
  canonical text;
  entries text[] := '{}';
BEGIN
  IF TG_OP = 'INSERT' OR NEW.client_id IS DISTINCT FROM OLD.client_id THEN
    -- ids chosen before this check existed stay as they are; new ones keep the format
    IF NEW.client_id IS NULL OR NEW.client_id !~ '^[a-z0-9][a-z0-9_-]{2,63}$' THEN
      RAISE EXCEPTION 'client_id "%" must be 3-64 lower-case letters, digits, _ or -, starting with a letter or digit', NEW.client_id
        USING ERRCODE = 'check_violation';
    END IF;
  END IF;
  IF NEW.client_name IS NULL OR btrim(NEW.client_name) = '' OR length(NEW.client_name) > 200 THEN
    RAISE EXCEPTION 'client_name of client % must be 1-200 characters, not blank', NEW.client_id
      USING ERRCODE = 'check_violation';
  END IF;
  IF NOT client_callback_url_is_valid(NEW.callback_url) THEN
    RAISE EXCEPTION 'callback_url "%" of client % is not an absolute http(s) URL (with a host, no credentials, no fragment, no spaces)', NEW.callback_url, NEW.client_id
      USING ERRCODE = 'check_violation';
  END IF;
  NEW.secret_hash := lower(NEW.secret_hash);
  IF NEW.secret_hash IS NULL OR NEW.secret_hash !~ '^[0-9a-f]{64}$' THEN
    RAISE EXCEPTION 'secret_hash "%" of client % is not the hex SHA-256 of a secret (64 characters 0-9a-f)', NEW.secret_hash, NEW.client_id
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.allowed_ips IS NULL THEN
    RAISE EXCEPTION 'allowed_ips of client % must be an array (''{}'' admits nobody)', NEW.client_id
      USING ERRCODE = 'check_violation';
  END IF;
  FOREACH entry IN ARRAY NEW.allowed_ips LOOP
    canonical := client_allow_list_entry(entry);
    IF canonical IS NULL THEN
      RAISE EXCEPTION 'allowed_ips entry "%" of client % is not an IP address or CIDR range', coalesce(entry, 'NULL'), NEW.client_id
        USING ERRCODE = 'check_violation';
    END IF;
    IF NOT canonical = ANY (entries) THEN
      entries := entries || canonical;
    END IF;
  END LOOP;
  NEW.allowed_ips := entries;
  NEW.active := coalesce(NEW.active, true);
  -- only a new or changed expiry is checked: a grace given earlier is not refused on every later
  -- update of the row. The service's own 30 days, now() + make_interval(secs => 2592000), passes.
  IF NEW.previous_secret_expires_at > now() + make_interval(secs => 2592000)
     AND (TG_OP = 'INSERT' OR NEW.previous_secret_expires_at IS DISTINCT FROM OLD.previous_secret_expires_at) THEN
    RAISE EXCEPTION 'previous_secret_expires_at % of client % is more than 30 days (2592000 seconds) away, the longest grace of a rotation',
      to_char(NEW.previous_secret_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), NEW.client_id
      USING ERRCODE = 'check_violation';
  END IF;
  IF TG_OP = 'UPDATE' THEN
    NEW.created_at := OLD.created_at;
    IF NEW.secret_hash IS DISTINCT FROM OLD.secret_hash AND NEW.secret_last4 IS NOT DISTINCT FROM OLD.secret_last4 THEN
      NEW.secret_last4 := ''; -- the old secret's last characters would mislabel the new one
    END IF;
    IF (NEW.client_id, NEW.client_name, NEW.callback_url, NEW.allowed_ips, NEW.active, NEW.secret_hash, NEW.logo_url,
        NEW.previous_secret_hash, NEW.previous_secret_expires_at)
       IS NOT DISTINCT FROM (OLD.client_id, OLD.client_name, OLD.callback_url, OLD.allowed_ips, OLD.active, OLD.secret_hash, OLD.logo_url,
        OLD.previous_secret_hash, OLD.previous_secret_expires_at) THEN
      NEW.secret_last4 := OLD.secret_last4;
      NEW.updated_at := OLD.updated_at;
    ELSE
      NEW.updated_at := now();
    END IF;
  END IF;
  RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION clients_after_write() RETURNS trigger
LANGUAGE plpgsql AS $$
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
    ORDER BY w.id;
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
           ELSE to_jsonb('expiry changed'::text) END END));
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
