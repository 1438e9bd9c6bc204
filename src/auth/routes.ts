import type { AccessTokenClaims } from './access-token.ts';
import { currentUser } from './guards.ts';
import { clientIp } from '../http/client-ip.ts';
import { err, invalid, limited } from '../openapi/operation.ts';
import * as R from '../openapi/responses.ts';
import { route } from '../routes/declare.ts';
import { forgotPasswordSchema, resetPasswordSchema, sessionLoginSchema, tokenLoginSchema } from './schemas.ts';
import { publicUser } from './service.ts';
import { endSession, establishSession, signOutPreviousUser } from './session.ts';

const user = { id: 7, username: 'alice', email: 'alice@example.com', role: 'user', full_name: 'Alice Example' };
const jwt = 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ1c2VyX2lkIjoiNyJ9.c2lnbmF0dXJl';
const browser = (req: { get(name: string): string | undefined }) => req.get('user-agent') ?? null;

/**
 * User sign-in over the API: a session (POST /api/auth/login), an access token
 * (POST /api/login), sign-out, and the password reset by email. The sign-in routes share the
 * per-IP login limit.
 */
export const AUTH_ROUTES = [
  route({
    method: 'post', path: '/api/auth/login', tag: 'Sign-in', access: 'public', limit: 'login',
    summary: 'Sign in and start a session',
    description: '`totp` is required for users with two-factor authentication (a TOTP or a recovery code). Sets the session cookie.',
    body: sessionLoginSchema,
    example: { login: 'alice', password: 'correct horse battery', totp: '123456' },
    responses: {
      200: { description: 'Signed in', schema: R.sessionLogin, example: { success: true, user } },
      400: invalid,
      401: err('Invalid credentials (`invalid_credentials`), wrong two-factor code (`invalid_totp`), a code already used (`totp_reused`: wait for the next one), or a missing code (`totp_required`, not counted). Counted failures carry `attempts_remaining`; at 1 the message warns that the next failure locks. The failure that sets the lock (the fifth) is a 401 too, with `locked: true`, `remaining_minutes` and `attempts_remaining: 0`, and says so in its message; the attempts after it answer 423.',
        { error: 'invalid_credentials', message: 'Invalid login or password. Too many failed attempts: this account is now locked for 30 minutes.', attempts_remaining: 0, locked: true, remaining_minutes: 30 }),
      403: err('The password must be changed first (`password_change_required`): change it with POST /api/user/password', { error: 'password_change_required', message: 'Your password must be changed before you can sign in' }),
      423: err('Account locked: every attempt after the one that set the lock, while it lasts (nothing is checked)', { error: 'account_locked', message: 'Too many failed sign-in attempts. This account is locked; try again in 30 minutes.', remaining_minutes: 30 }),
      429: limited,
    },
    handle: ({ auth }) => async ({ req, res, body }) => {
      const { user: signedIn, twoFactorUsed, credentialsVersion } = await auth.login({
        login: body.login, password: body.password, totp: body.totp, ipAddress: clientIp(req), userAgent: browser(req), via: 'api',
      });
      await signOutPreviousUser(req, auth, signedIn, { ipAddress: clientIp(req), userAgent: browser(req), via: 'api' });
      await establishSession(req, signedIn, { twoFactorUsed, credentialsVersion });
      res.json({ success: true, user: publicUser(signedIn) });
    },
  }),
  route({
    method: 'post', path: '/api/login', tag: 'Sign-in', access: 'public', limit: 'login',
    summary: 'Sign in and get an access token for this service\'s API',
    body: tokenLoginSchema,
    example: { username: 'alice', password: 'correct horse battery' },
    responses: {
      200: { description: 'Signed in', schema: R.accessToken, example: { token: jwt, token_type: 'Bearer', expires_in: 900, user } },
      400: invalid,
      401: err('Invalid credentials or two-factor code, as for /api/auth/login (with `attempts_remaining`; the failure that sets the lock with `locked: true` and `remaining_minutes`)', { error: 'invalid_credentials', message: 'Invalid login or password.', attempts_remaining: 4 }),
      403: err('The password must be changed first (`password_change_required`)', { error: 'password_change_required', message: 'Your password must be changed before you can sign in' }),
      423: err('Account locked, as for /api/auth/login', { error: 'account_locked', message: 'Too many failed sign-in attempts. This account is locked; try again in 30 minutes.', remaining_minutes: 30 }),
      429: limited,
    },
    handle: ({ auth }) => async ({ req, res, body }) => {
      const { user: signedIn, credentialsVersion } = await auth.login({
        login: body.username, password: body.password, totp: body.totp, ipAddress: clientIp(req), userAgent: browser(req), via: 'api_token',
      });
      res.json({ ...auth.issueAccessToken(signedIn, credentialsVersion), user: publicUser(signedIn) });
    },
  }),
  route({
    method: 'post', path: '/api/auth/logout', tag: 'Sign-in', access: 'public', limit: 'none',
    summary: 'Sign out: end the session (or revoke the bearer token that asks), invalidate unused SSO tokens',
    description: 'A request that carries a cookie must say `Content-Type: application/json` (even without a body): a cross-site form cannot.',
    responses: { 200: { description: 'Signed out (also when nobody was signed in)', schema: R.success, example: { success: true } } },
    /** Idempotent: without a signed-in user there is nothing to end, and that is not an error. */
    handle: ({ auth }) => async ({ req, res }) => {
      const signedIn = res.locals.user ? currentUser(res) : undefined;
      if (signedIn) {
        // with a bearer token, that token is what signs out (the user's other tokens stay)
        const accessToken = res.locals.authMethod === 'bearer' ? res.locals.accessToken as AccessTokenClaims : undefined;
        // a session's row goes in the sign-out's transaction, before its tokens are invalidated
        const endSessionId = res.locals.authMethod === 'session' ? req.sessionID : undefined;
        await auth.logoutUser({ userId: signedIn.id, ipAddress: clientIp(req), userAgent: browser(req), via: 'api', accessToken, endSessionId });
      }
      await endSession(req);
      res.json({ success: true });
    },
  }),
  route({
    method: 'post', path: '/api/auth/password/forgot', tag: 'Sign-in', access: 'public', limit: 'login',
    summary: 'Ask for a password reset link by email',
    description: '`login` is a username or an email address. The answer is the same, and as fast, whether or not an account matches: the lookup and the mail happen afterwards. An active account gets one message with a link to `/reset-password?token=…`, valid once for PASSWORD_RESET_TTL; at most one mail per account per PASSWORD_RESET_INTERVAL (a request sooner sends nothing; a newer link leaves the older working); using a link or a password change kills them all.',
    body: forgotPasswordSchema,
    example: { login: 'alice' },
    responses: {
      202: { description: 'Taken (whatever the name)', schema: R.success, example: { success: true } },
      400: invalid, 429: limited,
      503: err('Production without SMTP_URL: an administrator must reset the password', { error: 'email_not_configured', message: 'Password reset by email is not available; an administrator must reset the password' }),
    },
    /** 202 with one body whoever the name is: the lookup and the mail happen after the answer. */
    handle: ({ passwords }) => ({ req, res, body }) => {
      passwords.requestReset(body.login, { ipAddress: clientIp(req), userAgent: browser(req), via: 'api' });
      res.status(202).json({ success: true });
    },
  }),
  route({
    method: 'post', path: '/api/auth/password/reset', tag: 'Sign-in', access: 'public', limit: 'login',
    summary: 'Set a new password with the token of a reset link',
    description: 'Uses the token up, clears the lockout, signs the user out everywhere (sessions, access tokens, unused SSO tokens; user.logout) and is audited. A password the policy refuses leaves the token usable.',
    body: resetPasswordSchema,
    example: { token: 'Zk3v0Jc2y8b1QmPqT5sWn7Xe4Ra6Ud9Hf0Gi2Lk3Mo4', new_password: 'four unrelated words here' },
    responses: {
      200: { description: 'Changed', schema: R.success, example: { success: true } },
      400: err('Used, expired or unknown token; or a password the policy refuses', { error: 'invalid_reset_token', message: 'This reset link is invalid, used or expired; ask for a new one' }),
      429: limited,
    },
    handle: ({ passwords }) => async ({ req, res, body }) => {
      await passwords.reset(body.token, body.new_password, { ipAddress: clientIp(req), userAgent: browser(req), via: 'api' });
      res.json({ success: true });
    },
  }),
];
