/**
 * The version of a user's credentials, as text: password_changed_at to the microsecond ('0'
 * before any change). A password change, reset or set, a sign-out everywhere and a
 * deactivation each move it. A sign-in reads it when it commits; the session or access token
 * it then makes carries it, and is refused when the version has moved since, even when it was
 * made after the change.
 */
export const CREDENTIALS_VERSION = `COALESCE((extract(epoch FROM password_changed_at) * 1000000)::bigint::text, '0')`;
