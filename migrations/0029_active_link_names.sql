-- Only a proven (active) dashboard link holds its name at a client system (docs/dashboard-links.md).
-- A pending claim is anyone's typing: holding the name let a user keep it from its owner, and
-- from an administrator creating an account with it, and told the claimant whether another
-- user had claimed or held it. Claims now never conflict with each other; the one holder per
-- name is decided when a claim is proven, by this index.
DROP INDEX user_client_links_name;
CREATE UNIQUE INDEX user_client_links_active_name ON user_client_links (client_id, username_key) WHERE status = 'active';
