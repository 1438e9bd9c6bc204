import { z } from 'zod';
import { changePasswordSchema, forgotPasswordSchema, resetPasswordSchema } from '../auth/schemas.ts';
import { changePasswordFormSchema, endSessionFormSchema, forgotFormSchema, resetFormSchema, resetQuerySchema } from '../pages/account-schemas.ts';
import { err, html, invalid, limited, type Operation, redirect, unauthenticated } from './operation.ts';
import * as R from './responses.ts';

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

const revoked = z.object({ success: z.literal(true), ended_sessions: z.number().int(), invalidated_tokens: z.number().int() });

const locked = err('Account locked', { error: 'account_locked', message: 'Too many failed sign-ins; try again in 30 minute(s)', remaining_minutes: 30 });
const weak = err('The new password breaks the policy; the message says what to fix', { error: 'invalid_password', message: 'The password must be at least 10 characters long.' });
const formAnswers = { 403: html('Missing or wrong CSRF token'), 429: html('Rate limited') };

/** Password change, reset by email and the user's sessions: API and pages. */
export const PASSWORD_OPERATIONS: Operation[] = [
  {
    method: 'post', path: '/api/auth/password/forgot', tag: 'Sign-in', access: 'public', limit: 'login',
    summary: 'Ask for a password reset link by email',
    description: '`login` is a username or an email address. The answer is the same, and as fast, whether or not an account matches: the lookup and the mail happen afterwards. An active account gets one message with a link to `/reset-password?token=…`, valid once for PASSWORD_RESET_TTL; a newer request or a password change kills older links.',
    body: forgotPasswordSchema,
    example: { login: 'alice' },
    responses: {
      202: { description: 'Taken (whatever the name)', schema: R.success, example: { success: true } },
      400: invalid, 429: limited,
      503: err('Production without SMTP_URL: an administrator must reset the password', { error: 'email_not_configured', message: 'Password reset by email is not available; an administrator must reset the password' }),
    },
  },
  {
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
  },
  {
    method: 'post', path: '/api/user/password', tag: 'User', access: 'public', limit: 'login',
    summary: 'Change the password (proving the current one)',
    description: 'Signed in (session or `Authorization: Bearer`): `{current_password, new_password}`. After a sign-in answered `403 password_change_required`: add `login` (and `totp` for two-factor users) and send it without a session. A wrong current password counts as a failed sign-in (lockout, audit, user.login_failed). On success every other session ends, access tokens issued before stop working, unused SSO tokens are invalidated (user.logout).',
    body: changePasswordSchema,
    example: { current_password: 'correct horse battery', new_password: 'four unrelated words here' },
    responses: {
      200: { description: 'Changed', schema: R.success, example: { success: true } },
      400: weak,
      401: err('Wrong current password, or nobody signed in and no `login`', { error: 'invalid_credentials', message: 'Invalid login or password' }),
      423: locked, 429: limited,
    },
  },
  {
    method: 'get', path: '/api/user/sessions', tag: 'User', access: 'user', limit: 'user',
    summary: 'The signed-in user\'s sessions',
    responses: { 200: { description: 'Most recently seen first', schema: userSession.array() }, 401: unauthenticated, 429: limited },
  },
  {
    method: 'post', path: '/api/user/sessions/revoke-all', tag: 'User', access: 'user', limit: 'user',
    summary: 'Sign out everywhere else',
    description: 'Ends every session of the user but the caller\'s own (a bearer caller: all of them), refuses access tokens issued so far (the caller\'s included), invalidates unused SSO tokens and sends user.logout.',
    responses: { 200: { description: 'Signed out', schema: revoked, example: { success: true, ended_sessions: 2, invalidated_tokens: 0 } }, 401: unauthenticated, 429: limited },
  },

  // Pages
  {
    method: 'get', path: '/account/password', tag: 'Pages', access: 'page',
    summary: 'Change-password form (also where a must-change sign-in lands)',
    responses: { 200: html('The form'), 303: redirect('Not signed in: to /login') },
  },
  {
    method: 'post', path: '/account/password', tag: 'Pages', access: 'page', limit: 'login', bodyType: 'form',
    summary: 'Change the password',
    body: changePasswordFormSchema,
    example: { current_password: 'correct horse battery', new_password: 'four unrelated words here', confirm_password: 'four unrelated words here' },
    responses: { 303: redirect('Changed: back to the form, or on with the sign-in'), 400: html('Refused new password'), 401: html('Wrong current password'), 423: html('Locked'), ...formAnswers },
  },
  {
    method: 'get', path: '/account/sessions', tag: 'Pages', access: 'page',
    summary: 'The user\'s sessions: device, IP, last seen',
    responses: { 200: html('The list'), 303: redirect('Not signed in: to /login') },
  },
  {
    method: 'post', path: '/account/sessions/end', tag: 'Pages', access: 'page', bodyType: 'form',
    summary: 'End one session',
    body: endSessionFormSchema, example: { session: 'q1w2e3r4t5y6u7i8o9p0as' },
    responses: { 303: redirect('Back to the list (to /login when it was this one)'), 403: html('Missing or wrong CSRF token') },
  },
  {
    method: 'post', path: '/account/sessions/end-all', tag: 'Pages', access: 'page', bodyType: 'form',
    summary: 'End every other session',
    responses: { 303: redirect('Back to the list'), 403: html('Missing or wrong CSRF token') },
  },
  {
    method: 'get', path: '/forgot-password', tag: 'Pages', access: 'public',
    summary: 'Ask for a reset link',
    responses: { 200: html('The form'), 503: html('No mail in production: an administrator must reset the password') },
  },
  {
    method: 'post', path: '/forgot-password', tag: 'Pages', access: 'public', limit: 'login', bodyType: 'form',
    summary: 'Send a reset link (the same answer whatever the name)',
    body: forgotFormSchema, example: { login: 'alice' },
    responses: { 202: html('A link is on its way if an account matches'), 400: html('Empty field'), 503: html('No mail in production'), ...formAnswers },
  },
  {
    method: 'get', path: '/reset-password', tag: 'Pages', access: 'public',
    summary: 'Choose a new password with an emailed link',
    query: resetQuerySchema,
    responses: { 200: html('The form'), 400: html('The link is used, expired or unknown') },
  },
  {
    method: 'post', path: '/reset-password', tag: 'Pages', access: 'public', limit: 'login', bodyType: 'form',
    summary: 'Set the new password',
    body: resetFormSchema,
    example: { token: 'Zk3v0Jc2y8b1QmPqT5sWn7Xe4Ra6Ud9Hf0Gi2Lk3Mo4', new_password: 'four unrelated words here', confirm_password: 'four unrelated words here' },
    responses: { 200: html('Changed: sign in'), 400: html('Refused password, or the link does not work'), ...formAnswers },
  },
];
