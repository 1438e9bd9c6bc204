-- Client systems as SQL: the clients table is an interface administrators write to by hand
-- (seeds/*.sql, psql), so the database itself canonicalizes and refuses invalid rows, and it
-- audits and announces every change, whoever makes it (README "Client systems as SQL").

-- A seeded client has no plain secret to take the last four characters from: its mask is bare.
ALTER TABLE clients ALTER COLUMN secret_last4 SET DEFAULT '';

-- Canonical form of one allow-list entry, as src/clients/allowlist.ts writes it: an address
-- ('10.0.0.7', '2001:db8::1') or a range with its host bits cleared ('10.0.0.0/8');
-- IPv4-mapped IPv6 folded to IPv4. NULL for anything else. PostgreSQL's inet reads '010.0.0.1'
-- as 10.0.0.1; a person may have meant octal, so IPv4 must be four decimal parts without
-- leading zeros (no short, hex or integer forms either), and nothing may surround the entry.
CREATE FUNCTION client_allow_list_entry(entry text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
  quad constant text := '(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}';
  has_prefix constant boolean := strpos(entry, '/') > 0;
  address constant text := split_part(entry, '/', 1);
  value inet;
  bits integer;
BEGIN
  IF has_prefix AND substr(entry, strpos(entry, '/') + 1) !~ '^(0|[1-9][0-9]{0,2})$' THEN
    RETURN NULL;
  END IF;
  IF strpos(address, ':') = 0 THEN
    IF address !~ ('^' || quad || '$') THEN RETURN NULL; END IF;
  ELSIF address !~ '^[0-9A-Fa-f:.]+$' OR (strpos(address, '.') > 0 AND address !~ (':' || quad || '$')) THEN
    RETURN NULL;
  END IF;
  BEGIN
    value := entry::inet;
  EXCEPTION WHEN invalid_text_representation THEN
    RETURN NULL;
  END;
  bits := masklen(value);
  IF family(value) = 6 AND bits >= 96 AND value <<= '::ffff:0.0.0.0/96'::inet THEN
    bits := bits - 96;
    value := set_masklen('0.0.0.0'::inet + (host(value)::inet - '::ffff:0.0.0.0'::inet), bits);
  END IF;
  IF has_prefix THEN
    RETURN host(network(value)) || '/' || bits;
  END IF;
  RETURN host(value);
END $$;

-- True when every entry is present and already canonical (the CHECK behind the trigger below).
CREATE FUNCTION client_allow_list_is_canonical(entries text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(array_ndims(entries), 1) = 1
     AND NOT EXISTS (SELECT 1 FROM unnest(entries) AS e WHERE client_allow_list_entry(e) IS DISTINCT FROM e)
$$;

-- An absolute http(s) URL with a host, an optional valid port, no credentials, no fragment,
-- printable ASCII only (what the service writes after URL parsing; spaces must be escaped).
CREATE FUNCTION client_callback_url_is_valid(url text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT url IS NOT NULL
     AND length(url) <= 2048
     AND url ~ '^[!-~]+$'
     AND strpos(url, '#') = 0
     AND url ~ '^https?://([A-Za-z0-9._~!$&''()*+,;=-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?([/?].*)?$'
     AND coalesce(substring(url FROM '^https?://(?:\[[^]]*\]|[^/?:]*):([0-9]+)')::integer, 0) <= 65535
$$;

-- The old rows were written by the service or by hand: bring them to the form the checks
-- below demand before adding them. Entries that are no address are dropped (fail closed:
-- fewer callers admitted, never more); a client whose callback or secret hash is unusable
-- is deactivated. What was changed is kept in the audit log.
WITH repaired AS (
  SELECT c.client_id,
         coalesce((SELECT array_agg(x.entry ORDER BY x.first) FROM (
             SELECT client_allow_list_entry(btrim(e)) AS entry, min(n) AS first
             FROM unnest(c.allowed_ips) WITH ORDINALITY AS u(e, n)
             WHERE client_allow_list_entry(btrim(e)) IS NOT NULL
             GROUP BY 1) AS x), '{}') AS allowed_ips,
         coalesce((SELECT array_agg(e ORDER BY n) FROM unnest(c.allowed_ips) WITH ORDINALITY AS u(e, n)
                   WHERE e IS NULL OR client_allow_list_entry(btrim(e)) IS NULL), '{}') AS dropped,
         client_callback_url_is_valid(c.callback_url) AS callback_ok,
         lower(c.secret_hash) ~ '^[0-9a-f]{64}$' AS hash_ok
  FROM clients c
), audited AS (
  INSERT INTO audit_log (action, outcome, client_id, details)
  SELECT 'client.update', 'success', r.client_id, jsonb_strip_nulls(jsonb_build_object(
           'via', 'migration',
           'migration', '0002_clients_as_sql',
           'dropped_allowed_ips', CASE WHEN cardinality(r.dropped) > 0 THEN to_jsonb(r.dropped) END,
           'previous_callback_url', CASE WHEN NOT r.callback_ok THEN to_jsonb(c.callback_url) END,
           'secret_hash_replaced', CASE WHEN NOT r.hash_ok THEN to_jsonb(true) END,
           'deactivated', CASE WHEN c.active AND NOT (r.callback_ok AND r.hash_ok) THEN to_jsonb(true) END))
  FROM repaired r JOIN clients c USING (client_id)
  WHERE cardinality(r.dropped) > 0 OR NOT r.callback_ok OR NOT r.hash_ok
  RETURNING client_id
)
UPDATE clients c SET
  allowed_ips = r.allowed_ips,
  -- RFC 2606 reserves .invalid: this callback never resolves; the old one is in the audit log
  callback_url = CASE WHEN r.callback_ok THEN c.callback_url ELSE 'https://callback.invalid/' END,
  -- a hash no secret has: the client can no longer authenticate until a new secret is set
  secret_hash = CASE WHEN r.hash_ok THEN lower(c.secret_hash)
                     ELSE encode(sha256(convert_to(gen_random_uuid()::text || clock_timestamp()::text, 'UTF8')), 'hex') END,
  active = c.active AND r.callback_ok AND r.hash_ok,
  client_name = CASE WHEN btrim(c.client_name) = '' THEN c.client_id ELSE c.client_name END
FROM repaired r
WHERE r.client_id = c.client_id
  AND (c.allowed_ips IS DISTINCT FROM r.allowed_ips OR NOT r.callback_ok OR NOT r.hash_ok OR btrim(c.client_name) = '');

ALTER TABLE clients
  ADD CONSTRAINT clients_allowed_ips_valid CHECK (client_allow_list_is_canonical(allowed_ips)),
  ADD CONSTRAINT clients_callback_url_valid CHECK (client_callback_url_is_valid(callback_url)),
  ADD CONSTRAINT clients_secret_hash_valid CHECK (secret_hash ~ '^[0-9a-f]{64}$'),
  ADD CONSTRAINT clients_client_name_valid CHECK (btrim(client_name) <> '' AND length(client_name) <= 200);

-- Canonicalizes and checks every written row with messages that name the client and the
-- offending value (the CHECKs above only say which constraint failed), and derives the columns
-- a hand-written row leaves out. A re-applied, unchanged row keeps its updated_at.
CREATE FUNCTION clients_before_write() RETURNS trigger
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
  IF TG_OP = 'UPDATE' THEN
    NEW.created_at := OLD.created_at;
    IF NEW.secret_hash IS DISTINCT FROM OLD.secret_hash AND NEW.secret_last4 IS NOT DISTINCT FROM OLD.secret_last4 THEN
      NEW.secret_last4 := ''; -- the old secret's last characters would mislabel the new one
    END IF;
    IF (NEW.client_id, NEW.client_name, NEW.callback_url, NEW.allowed_ips, NEW.active, NEW.secret_hash)
       IS NOT DISTINCT FROM (OLD.client_id, OLD.client_name, OLD.callback_url, OLD.allowed_ips, OLD.active, OLD.secret_hash) THEN
      NEW.secret_last4 := OLD.secret_last4;
      NEW.updated_at := OLD.updated_at;
    ELSE
      NEW.updated_at := now();
    END IF;
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER clients_before_write BEFORE INSERT OR UPDATE ON clients
  FOR EACH ROW EXECUTE FUNCTION clients_before_write();

-- Who made the change: the service sets auth.actor (a JSON object: via, actor, actor_user_id,
-- ip_address, user_agent, file) for its transaction; a write without it came through plain SQL.
CREATE FUNCTION clients_change_actor() RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT coalesce(nullif(current_setting('auth.actor', true), '')::jsonb,
                  jsonb_build_object('via', 'sql', 'db_user', session_user::text))
$$;

-- Audits every change of a client and announces a new one (client.registered), in the
-- transaction that made it: the same for the CLI, the panel, the API, seeds and psql.
CREATE FUNCTION clients_after_write() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  actor constant jsonb := clients_change_actor();
  details constant jsonb := actor - 'ip_address' - 'user_agent';
  changed jsonb;
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO audit_log (action, outcome, client_id, ip_address, user_agent, details)
    VALUES ('client.create', 'success', NEW.client_id, actor->>'ip_address', actor->>'user_agent', details);
    INSERT INTO webhook_deliveries (id, webhook_id, event, data)
    SELECT gen_random_uuid(), w.id, 'client.registered', jsonb_build_object('client_id', NEW.client_id, 'client_name', NEW.client_name)
    FROM webhooks w WHERE w.active AND 'client.registered' = ANY (w.events)
    ORDER BY w.id;
    RETURN NULL;
  END IF;
  IF TG_OP = 'DELETE' THEN
    INSERT INTO audit_log (action, outcome, client_id, ip_address, user_agent, details)
    VALUES ('client.delete', 'success', OLD.client_id, actor->>'ip_address', actor->>'user_agent', details);
    RETURN NULL;
  END IF;
  changed := jsonb_strip_nulls(jsonb_build_object(
    'client_id', CASE WHEN NEW.client_id IS DISTINCT FROM OLD.client_id THEN to_jsonb(NEW.client_id) END,
    'client_name', CASE WHEN NEW.client_name IS DISTINCT FROM OLD.client_name THEN to_jsonb(NEW.client_name) END,
    'callback_url', CASE WHEN NEW.callback_url IS DISTINCT FROM OLD.callback_url THEN to_jsonb(NEW.callback_url) END,
    'allowed_ips', CASE WHEN NEW.allowed_ips IS DISTINCT FROM OLD.allowed_ips THEN to_jsonb(NEW.allowed_ips) END,
    'active', CASE WHEN NEW.active IS DISTINCT FROM OLD.active THEN to_jsonb(NEW.active) END,
    'secret', CASE WHEN NEW.secret_hash IS DISTINCT FROM OLD.secret_hash THEN to_jsonb('replaced'::text) END));
  IF changed = '{}'::jsonb THEN
    RETURN NULL; -- re-applied unchanged: nothing happened
  END IF;
  INSERT INTO audit_log (action, outcome, client_id, ip_address, user_agent, details)
  VALUES (CASE WHEN changed = '{"secret": "replaced"}'::jsonb THEN 'client.rotate_secret' ELSE 'client.update' END,
          'success', NEW.client_id, actor->>'ip_address', actor->>'user_agent',
          details || jsonb_build_object('changed', changed));
  RETURN NULL;
END $$;

CREATE TRIGGER clients_after_write AFTER INSERT OR UPDATE OR DELETE ON clients
  FOR EACH ROW EXECUTE FUNCTION clients_after_write();
