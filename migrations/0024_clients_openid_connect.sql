-- Every client system is also an OpenID Connect client (docs/openid-connect.md): the redirect
-- URIs beside its callback URL, where a sign-out may return to, whether it is a public client
-- (a single-page or native app: no secret, PKCE required, no allow list) and where its
-- back-channel logout tokens go. Checked by the database like callback_url, whoever writes the
-- row (the service, a seed file, psql).

ALTER TABLE clients
  ADD COLUMN redirect_uris text[] NOT NULL DEFAULT '{}',
  ADD COLUMN post_logout_redirect_uris text[] NOT NULL DEFAULT '{}',
  ADD COLUMN public boolean NOT NULL DEFAULT false,
  ADD COLUMN backchannel_logout_uri text;

-- Functions keep the search_path they were created with: a seed from pg_dump empties it.

-- Every entry an absolute http(s) URL with a host, no credentials, no fragment (as callback_url),
-- at most 20 of them.
CREATE FUNCTION client_urls_are_valid(urls text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE SET search_path FROM CURRENT AS $$
  SELECT urls IS NOT NULL
     AND coalesce(array_length(urls, 1), 0) <= 20
     AND NOT EXISTS (SELECT 1 FROM unnest(urls) AS u WHERE NOT coalesce(client_callback_url_is_valid(u), false))
$$;

ALTER TABLE clients
  ADD CONSTRAINT clients_redirect_uris_valid CHECK (client_urls_are_valid(redirect_uris)),
  ADD CONSTRAINT clients_post_logout_redirect_uris_valid CHECK (client_urls_are_valid(post_logout_redirect_uris)),
  ADD CONSTRAINT clients_backchannel_logout_uri_valid CHECK (backchannel_logout_uri IS NULL OR client_callback_url_is_valid(backchannel_logout_uri)),
  -- a public client's calls come from browsers and phones: an allow list would mean nothing
  ADD CONSTRAINT clients_public_without_allow_list CHECK (NOT public OR allowed_ips = '{}');

-- The check of clients_before_write (migration 0002) runs first (triggers fire in name order):
-- this one says which entry is wrong, and moves updated_at when only these columns changed.
CREATE FUNCTION clients_before_write_oidc() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  entry text;
BEGIN
  FOREACH entry IN ARRAY coalesce(NEW.redirect_uris, '{}') || coalesce(NEW.post_logout_redirect_uris, '{}') || coalesce(ARRAY[NEW.backchannel_logout_uri], '{}') LOOP
    IF entry IS NOT NULL AND NOT client_callback_url_is_valid(entry) THEN
      RAISE EXCEPTION 'URL "%" of client % is not an absolute http(s) URL (with a host, no credentials, no fragment, no spaces)', entry, NEW.client_id
        USING ERRCODE = 'check_violation';
    END IF;
  END LOOP;
  IF NEW.public AND NEW.allowed_ips <> '{}' THEN
    RAISE EXCEPTION 'client % is public (no secret, called from browsers): it cannot have an IP allow list', NEW.client_id
      USING ERRCODE = 'check_violation';
  END IF;
  IF TG_OP = 'UPDATE' AND (NEW.redirect_uris, NEW.post_logout_redirect_uris, NEW.public, NEW.backchannel_logout_uri)
     IS DISTINCT FROM (OLD.redirect_uris, OLD.post_logout_redirect_uris, OLD.public, OLD.backchannel_logout_uri) THEN
    NEW.updated_at := now();
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER clients_before_write_oidc BEFORE INSERT OR UPDATE ON clients
  FOR EACH ROW EXECUTE FUNCTION clients_before_write_oidc();

-- Changes of these columns are audited as client.update naming them (the audit of migration
-- 0002 names the columns it knows), with the same actor.
CREATE FUNCTION clients_after_write_oidc() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  actor constant jsonb := clients_change_actor();
  changed jsonb;
BEGIN
  changed := jsonb_strip_nulls(jsonb_build_object(
    'redirect_uris', CASE WHEN NEW.redirect_uris IS DISTINCT FROM OLD.redirect_uris THEN to_jsonb(NEW.redirect_uris) END,
    'post_logout_redirect_uris', CASE WHEN NEW.post_logout_redirect_uris IS DISTINCT FROM OLD.post_logout_redirect_uris THEN to_jsonb(NEW.post_logout_redirect_uris) END,
    'public', CASE WHEN NEW.public IS DISTINCT FROM OLD.public THEN to_jsonb(NEW.public) END,
    'backchannel_logout_uri', CASE WHEN NEW.backchannel_logout_uri IS DISTINCT FROM OLD.backchannel_logout_uri THEN coalesce(to_jsonb(NEW.backchannel_logout_uri), '""'::jsonb) END));
  IF changed = '{}'::jsonb THEN
    RETURN NULL;
  END IF;
  INSERT INTO audit_log (action, outcome, client_id, ip_address, user_agent, details)
  VALUES ('client.update', 'success', NEW.client_id, actor->>'ip_address', actor->>'user_agent',
          (actor - 'ip_address' - 'user_agent') || jsonb_build_object('changed', changed));
  RETURN NULL;
END $$;

CREATE TRIGGER clients_after_write_oidc AFTER UPDATE ON clients
  FOR EACH ROW EXECUTE FUNCTION clients_after_write_oidc();
