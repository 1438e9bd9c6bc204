-- A client's logo, whoever writes the row (seed files, psql), follows the rules the service
-- applies (src/pages/logo-url.ts logoUrlProblem): a base64 data: image, or a path under /assets
-- with no empty or parent segment. Until now the database bounded its length only, and a logo
-- written in SQL as a same-origin address such as /sso/logout, fetched with the session cookie
-- as the sign-in page loaded, ended the session holding the form's CSRF token (the page now
-- leaves such a logo out as well: src/pages/login.ts).
CREATE FUNCTION client_logo_url_is_valid(url text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT url IS NULL
      OR (length(url) <= 15000 AND (
            url ~ '^data:image/(png|jpeg|gif|webp|svg\+xml);base64,[A-Za-z0-9+/]+={0,2}$'
         OR (url ~ '^/assets/[A-Za-z0-9._~/-]+$' AND position('//' IN url) = 0
             AND NOT ('..' = ANY (string_to_array(url, '/'))))))
$$;

-- A logo that breaks the rules is removed (the clients trigger audits it, via: migration): the
-- page shows the organisation's logo instead, as it does for a client without one.
SELECT set_config('auth.actor', '{"via": "migration", "reason": "logo_url_refused"}', true);
UPDATE clients SET logo_url = NULL WHERE NOT client_logo_url_is_valid(logo_url);
SELECT set_config('auth.actor', '', true);

ALTER TABLE clients ADD CONSTRAINT clients_logo_url_valid CHECK (client_logo_url_is_valid(logo_url));
