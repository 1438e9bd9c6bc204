-- A browser's SSO tokens by the session they were issued under (sso_tokens.session_id): a
-- sign-in that renews the session's id for the same user (a password change, a second
-- sign-in) moves them to the new id, so a client's logout with one of them still ends that
-- session (src/auth/session-queries.ts, saveSignedInSession). Partial: the tokens of
-- server-to-server issue, the hot path, have no session and are not indexed.
CREATE INDEX sso_tokens_by_session ON sso_tokens (session_id) WHERE session_id IS NOT NULL;
