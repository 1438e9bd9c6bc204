import { html, pageError, redirect } from '../openapi/operation.ts';
import { handlersFrom, route } from '../routes/declare.ts';
import { accountHandlers } from './account.ts';
import { changePasswordFormSchema, endSessionFormSchema, forgotFormSchema, resetFormSchema, resetQuerySchema } from './account-schemas.ts';
import { passwordResetHandlers } from './password-reset.ts';

const account = handlersFrom((s) => accountHandlers(s));
const reset = handlersFrom((s) => passwordResetHandlers(s));
const formAnswers = { 403: pageError('Missing or wrong CSRF token'), 429: pageError('Rate limited') };

/**
 * Pages of a person's password and sessions: /account/password (change; where a must-change
 * sign-in lands), /account/sessions (end one or all), /forgot-password and /reset-password.
 * Forms are CSRF-checked; the anonymous ones share the per-IP login limit, and so does the
 * change form (it checks a password).
 */
export const ACCOUNT_PAGE_ROUTES = [
  route({
    // anyone: the handler serves a signed-in user and a must-change sign-in, and sends others to /login
    method: 'get', path: '/account/password', tag: 'Pages', access: 'page', limit: 'none',
    summary: 'Change-password form (also where a must-change sign-in lands)',
    responses: { 200: html('The form'), 303: redirect('Not signed in: to /login') },
    handle: account.handle((h) => h.showPassword),
  }),
  route({
    method: 'post', path: '/account/password', tag: 'Pages', access: 'page', limit: 'login', bodyType: 'form',
    summary: 'Change the password',
    body: changePasswordFormSchema,
    example: { current_password: 'correct horse battery', new_password: 'four unrelated words here', confirm_password: 'four unrelated words here' },
    responses: {
      200: html('Changed, but the session could not be kept (the database went away just after the change): signed out, with a link to sign in again'),
      303: redirect('Changed: back to the form, or on with the sign-in; not signed in: to /login'), 400: html('Refused new password'), 401: html('Wrong current password'), 423: html('Locked'), ...formAnswers },
    handle: account.handle((h) => h.changePassword),
    onError: account.onError((h) => h.passwordFailed),
  }),
  route({
    method: 'get', path: '/account/sessions', tag: 'Pages', access: 'page-user', limit: 'none',
    summary: 'The user\'s sessions: device, IP, last seen',
    responses: { 200: html('The list') },
    handle: account.handle((h) => h.showSessions),
  }),
  route({
    method: 'post', path: '/account/sessions/end', tag: 'Pages', access: 'page-user', limit: 'user', bodyType: 'form',
    summary: 'End one session',
    body: endSessionFormSchema, example: { session: 'q1w2e3r4t5y6u7i8o9p0as' },
    responses: { 303: redirect('Back to the list (to /login when it was this one)'), 400: pageError('Invalid form') },
    handle: account.handle((h) => h.endOne),
  }),
  route({
    method: 'post', path: '/account/sessions/end-all', tag: 'Pages', access: 'page-user', limit: 'user', bodyType: 'form',
    summary: 'End every other session',
    responses: { 303: redirect('Back to the list') },
    handle: account.handle((h) => h.endOthers),
  }),
  route({
    method: 'get', path: '/forgot-password', tag: 'Pages', access: 'page', limit: 'none',
    summary: 'Ask for a reset link',
    responses: { 200: html('The form'), 503: html('No mail in production: an administrator must reset the password') },
    handle: reset.handle((h) => h.showForgot),
  }),
  route({
    method: 'post', path: '/forgot-password', tag: 'Pages', access: 'page', limit: 'login', bodyType: 'form',
    summary: 'Send a reset link (the same answer whatever the name)',
    body: forgotFormSchema, example: { login: 'alice' },
    responses: { 202: html('A link is on its way if an account matches'), 400: html('Empty field'), 503: html('No mail in production'), ...formAnswers },
    handle: reset.handle((h) => h.submitForgot),
    onError: reset.onError((h) => h.forgotFailed),
  }),
  route({
    method: 'get', path: '/reset-password', tag: 'Pages', access: 'page', limit: 'none',
    summary: 'Choose a new password with an emailed link',
    query: resetQuerySchema,
    responses: { 200: html('The form'), 400: pageError('The link is used, expired or unknown') },
    handle: reset.handle((h) => h.showReset),
  }),
  route({
    method: 'post', path: '/reset-password', tag: 'Pages', access: 'page', limit: 'login', bodyType: 'form',
    summary: 'Set the new password',
    body: resetFormSchema,
    example: { token: 'Zk3v0Jc2y8b1QmPqT5sWn7Xe4Ra6Ud9Hf0Gi2Lk3Mo4', new_password: 'four unrelated words here', confirm_password: 'four unrelated words here' },
    responses: { 200: html('Changed: sign in'), 400: html('Refused password, or the link does not work'), ...formAnswers },
    handle: reset.handle((h) => h.submitReset),
    onError: reset.onError((h) => h.resetFailed),
  }),
];
