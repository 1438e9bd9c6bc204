-- The browser session a token was issued in (a sign-in at /sso/login or a dashboard link);
-- NULL for a token a client system asked for server to server. A client system's logout
-- (POST /api/sso/logout) ends that session, so that the next visit to /sso/login in that
-- browser asks for the password again (DESIGN: the logout "ends the session").
ALTER TABLE sso_tokens ADD COLUMN IF NOT EXISTS session_id text;
