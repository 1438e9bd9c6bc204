import type { Request } from 'express';
import { z } from 'zod';
import type { PasswordChanger } from '../auth/password-service.ts';
import { changePasswordSchema } from '../auth/schemas.ts';
import { publicUser } from '../auth/service.ts';
import { pendingPasswordChange, renewSessionAfterChange } from '../auth/session.ts';
import { credentialOf } from '../auth/guards.ts';
import { AppError } from '../http/errors.ts';
import { clientIp } from '../http/client-ip.ts';
import { err, limited, unauthenticated } from '../openapi/operation.ts';
import * as R from '../openapi/responses.ts';
import { route } from '../routes/declare.ts';
import { twoFactorCodeSchema, twoFactorEnableSchema } from './schemas.ts';

const user = { id: 7, username: 'alice', email: 'alice@example.com', role: 'user', full_name: 'Alice Example' };
const ctx = (req: Request) => ({ ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null });

const userSession = z.object({
  id: z.string().describe('A handle for the session (not its cookie)'),
  current: z.boolean().describe('The session of this request'),
  ip_address: z.string().nullable(),
  user_agent: z.string().nullable(),
  device: z.string().describe('Browser and system read from the User-Agent'),
  signed_in_at: z.string(),
  last_seen_at: z.string().describe('Updated at most once a minute'),
  expires_at: z.string(),
}).meta({ id: 'UserSession' });
const passwordChanged = R.success.extend({ session_ended: z.literal(true).optional().describe('Present when the caller\'s session could not be kept: sign in again') });
const revoked = z.object({ success: z.literal(true), ended_sessions: z.number().int(), invalidated_tokens: z.number().int() });

/**
 * The signed-in user's own resources (session or bearer access token), under the per-user
 * limit of user management; the limit runs before the user check, so anonymous callers are
 * limited (per IP) too.
 */
export const USER_ROUTES = [
  route({
    method: 'get', path: '/api/user', tag: 'User', access: 'user', limit: 'user',
    summary: 'The signed-in user\'s profile',
    responses: { 200: { description: 'Profile', schema: R.publicUser, example: user }, 401: unauthenticated, 429: limited },
    handle: () => ({ res, user: me }) => {
      res.json(publicUser(me));
    },
  }),
  route({
    method: 'post', path: '/api/user/2fa/setup', tag: 'User', access: 'user', limit: 'user',
    summary: 'Start two-factor enrollment: a new TOTP secret',
    description: 'The secret belongs to the session or access token that asked, for 10 minutes: only it is shown the setup again (on /account/security) and may turn it on. A new setup replaces its own earlier one. A password change or reset and a sign-out everywhere forget it.',
    responses: { 200: { description: 'Secret, otpauth URI and QR code', schema: R.totpSetup }, 401: unauthenticated, 409: err('Already enabled'), 429: limited },
    handle: ({ auth }) => async ({ req, res, user: me }) => {
      res.json(await auth.twoFactor.startSetup(me, ctx(req), credentialOf(req, res)));
    },
  }),
  route({
    method: 'post', path: '/api/user/2fa/enable', tag: 'User', access: 'user', limit: 'user',
    summary: 'Turn two-factor on with one valid code and the current password; returns recovery codes once',
    description: 'The current password is asked again: a borrowed session or token must not be able to put its own authenticator on the account and lock the owner out. A wrong one, or a refused code, counts as a failed sign-in, toward the lock.',
    body: twoFactorEnableSchema,
    example: { code: '123456', current_password: 'correct horse battery' },
    responses: {
      200: { description: 'Enabled; emits user.2fa_enabled. Every other session of the user ends and every access token stops working (user.logout); the calling session stays, and a calling access token is given its successor (`access_token`)', schema: R.totpEnabled },
      400: err('Invalid code (`invalid_totp`), a code already used (`totp_reused`), or body. A refused code counts toward the lock and carries `attempts_remaining` (the one that locks: `locked: true` and `remaining_minutes`)', { error: 'invalid_totp', message: 'The two-factor code is invalid.', attempts_remaining: 3 }),
      401: err('Wrong current password (`invalid_credentials`; the one that locks with `locked: true` and `remaining_minutes`), or nobody signed in (`unauthenticated`)', { error: 'invalid_credentials', message: 'Invalid login or password' }),
      409: err('Already enabled (`totp_already_enabled`), or no setup of this session or token (`totp_setup_required`: none started, expired after 10 minutes, or started by another session)'),
      423: err('Account locked', { error: 'account_locked', message: 'Too many failed sign-ins; try again in 30 minute(s)', remaining_minutes: 30 }),
      429: limited,
    },
    handle: ({ auth }) => async ({ req, res, body, user: me }) => {
      await auth.confirmPassword(me, body.current_password, { ...ctx(req), via: 'totp_enable' });
      const owner = credentialOf(req, res);
      const { recovery_codes, credentialsVersion } = await auth.twoFactor.enable(me, body.code, ctx(req), owner);
      // every access token stopped working, the one that asked too: it is given its successor
      res.json({ totp_enabled: true, recovery_codes, ...(owner.kind === 'token' ? { access_token: auth.issueAccessToken(me, credentialsVersion) } : {}) });
    },
  }),
  route({
    method: 'post', path: '/api/user/2fa/disable', tag: 'User', access: 'user', limit: 'user',
    summary: 'Turn two-factor off with a TOTP or recovery code',
    description: 'A refused code counts as a failed sign-in, toward the lock; while the account is locked no code is checked.',
    body: twoFactorCodeSchema,
    example: { code: 'ABCD-EFGH-JKLM' },
    responses: {
      200: { description: 'Disabled', schema: R.totpDisabled, example: { totp_enabled: false } },
      400: err('Invalid body or code (`invalid_totp`, `totp_reused`, with `attempts_remaining`; at 1 the message warns that the next failure locks; the one that locks carries `locked: true` and `remaining_minutes`)', { error: 'invalid_totp', message: 'The two-factor code is invalid.', attempts_remaining: 3 }),
      401: unauthenticated, 409: err('Two-factor is not enabled'),
      423: err('Account locked, while it lasts (the refused code that sets the lock is a 400 with `locked: true` and `remaining_minutes`)', { error: 'account_locked', message: 'Too many failed sign-in attempts. This account is locked; try again in 30 minutes.', remaining_minutes: 30 }),
      429: limited,
    },
    handle: ({ auth }) => async ({ req, res, body, user: me }) => {
      await auth.twoFactor.disable(me, body.code, ctx(req));
      res.json({ totp_enabled: false });
    },
  }),
  route({
    method: 'post', path: '/api/user/password', tag: 'User', access: 'public', limit: 'login',
    summary: 'Change the password (proving the current one)',
    description: 'Signed in (session or `Authorization: Bearer`): `{current_password, new_password}`. After a sign-in answered `403 password_change_required`: add `login` (and `totp` for two-factor users) and send it without a session. A wrong current password counts as a failed sign-in (lockout, audit, user.login_failed). On success every other session ends, access tokens issued before stop working, unused SSO tokens are invalidated (user.logout).',
    body: changePasswordSchema,
    example: { current_password: 'correct horse battery', new_password: 'four unrelated words here' },
    responses: {
      200: {
        description: 'Changed. `session_ended`: the password is changed, but the session could not be renewed (the database went away just after the change): '
          + 'the caller is signed out and signs in again with the new password',
        schema: passwordChanged, example: { success: true },
      },
      400: err('The new password breaks the policy (`invalid_password`; the message says what to fix), or the body is invalid', { error: 'invalid_password', message: 'The password must be at least 10 characters long.' }),
      401: err('Wrong current password (the one that locks with `locked: true` and `remaining_minutes`), or nobody signed in and no `login`', { error: 'invalid_credentials', message: 'Invalid login or password' }),
      423: err('Account locked', { error: 'account_locked', message: 'Too many failed sign-ins; try again in 30 minute(s)', remaining_minutes: 30 }),
      429: limited,
    },
    /**
     * The signed-in user (session or bearer), a must-change sign-in's restricted session, or
     * (no session) `login` with the current password: it proves who the caller is, which is
     * why this endpoint is under the login limit and a wrong password counts as a failed login.
     */
    handle: ({ passwords, deps }) => async ({ req, res, body, user: me }) => {
      const pending = me ? null : pendingPasswordChange(req);
      let who: PasswordChanger;
      if (me) who = { userId: me.id };
      else if (pending) who = { userId: pending.userId };
      else if (body.login) who = { login: body.login, totp: body.totp };
      else throw new AppError(401, 'unauthenticated', 'Sign in first, or give your login with the current password');
      const keepSid = res.locals.authMethod === 'session' ? req.sessionID : undefined;
      const changed = await passwords.change(who, body.current_password, body.new_password, { ...ctx(req), via: 'api' }, keepSid);
      if (pending) delete req.session.passwordChange;
      // the session that changed the password goes on under a new id (one copied before is worthless)
      const renewal = { twoFactorUsed: req.session?.twoFactorUsed === true, credentialsVersion: changed.credentialsVersion };
      if (keepSid && !(await renewSessionAfterChange(req, changed.user, renewal, deps.logger))) return res.json({ success: true, session_ended: true });
      res.json({ success: true });
    },
  }),
  route({
    method: 'get', path: '/api/user/sessions', tag: 'User', access: 'user', limit: 'user',
    summary: 'The signed-in user\'s sessions',
    responses: { 200: { description: 'Most recently seen first', schema: userSession.array() }, 401: unauthenticated, 429: limited },
    handle: ({ sessions }) => async ({ req, res, user: me }) => {
      const currentSid = res.locals.authMethod === 'session' ? req.sessionID : undefined;
      res.json(await sessions.list(me.id, currentSid));
    },
  }),
  route({
    method: 'post', path: '/api/user/sessions/revoke-all', tag: 'User', access: 'user', limit: 'user',
    summary: 'Sign out everywhere else',
    description: 'Ends every session of the user but the caller\'s own (a bearer caller: all of them), refuses access tokens issued so far (the caller\'s included), invalidates unused SSO tokens and sends user.logout.',
    responses: { 200: { description: 'Signed out', schema: revoked, example: { success: true, ended_sessions: 2, invalidated_tokens: 0 } }, 401: unauthenticated, 429: limited },
    /** Every other session ends (a bearer caller: all of them), and access tokens issued so far stop working. */
    handle: ({ sessions }) => async ({ req, res, user: me }) => {
      const keepSid = res.locals.authMethod === 'session' ? req.sessionID : undefined;
      res.json({ success: true, ...(await sessions.endAll(me, { ...ctx(req), via: 'api' }, keepSid)) });
    },
  }),
];
