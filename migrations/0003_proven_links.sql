-- Dashboard links must be proven before their name goes into a token (README "Dashboard links").
-- A link is 'pending' until its client system (with its credentials) or an administrator
-- confirms it; only an 'active' link's name is used. Every link made before this change was
-- whatever the user typed, so all of them start pending.
ALTER TABLE user_client_links
  ADD COLUMN status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'active')),
  ADD COLUMN confirmed_at timestamptz,
  -- 'client' or 'admin': who proved the link
  ADD COLUMN confirmed_by text CHECK (confirmed_by IN ('client', 'admin')),
  -- The name normalized like usernames (src/users/username.ts: NFKC, trimmed, lower-cased),
  -- computed by the database so every writer agrees; unique per client below.
  ADD COLUMN username_key text GENERATED ALWAYS AS (lower(btrim(normalize(external_username, NFKC)))) STORED;

-- A name claimed by more than one user at a client has no provable holder: those links are
-- removed (each audited) and their users link again, so a proof decides who holds it.
WITH contested AS (
  DELETE FROM user_client_links l
   WHERE (l.client_id, l.username_key) IN (
     SELECT client_id, username_key FROM user_client_links GROUP BY client_id, username_key HAVING count(*) > 1)
  RETURNING l.user_id, l.client_id, l.external_username
)
INSERT INTO audit_log (action, outcome, user_id, username, client_id, details)
SELECT 'user.link_revoke', 'success', c.user_id, u.username, c.client_id,
       jsonb_build_object('via', 'migration', 'reason', 'name_claimed_twice', 'external_username', c.external_username)
  FROM contested c JOIN users u ON u.id = c.user_id;

CREATE UNIQUE INDEX user_client_links_name ON user_client_links (client_id, username_key);
CREATE INDEX user_client_links_pending ON user_client_links (created_at) WHERE status = 'pending';

-- Unused tokens that carry a linked (unproven) name die now rather than at their expiry.
UPDATE sso_tokens t SET invalidated_at = now()
  FROM users u
 WHERE u.id = t.user_id AND t.username <> u.username
   AND t.used_at IS NULL AND t.invalidated_at IS NULL AND t.expires_at > now();
