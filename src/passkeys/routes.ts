import type { Request } from 'express';
import { publicUser } from '../auth/service.ts';
import { establishSession, signOutPreviousUser } from '../auth/session.ts';
import { clientIp } from '../http/client-ip.ts';
import { err, invalid, limited, unauthenticated } from '../openapi/operation.ts';
import * as R from '../openapi/responses.ts';
import { route } from '../routes/declare.ts';
import {
  authenticationVerifySchema, ceremonyOptions, passkeyBody, passkeyJson, passkeyList, passkeyParams, registrationOptionsSchema,
  registrationVerifySchema,
} from './schemas.ts';
import type { CeremonyContext } from './service.ts';

const ctx = (req: Request): CeremonyContext => ({ ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null, via: 'api' });
const options = { challenge: 'b3Ft1rXq0Ykz8vJcQ2pN5wHs7LmE4dRa6Ug9Ti0Oo1A', rpId: 'sso.example.com', userVerification: 'required', timeout: 300000 };
const passkey = { id: 3, name: 'Laptop', created_at: '2026-01-31T12:00:00.000Z', last_used_at: null };
const refused = err('The passkey was refused: an unknown credential, another origin or RP ID, a challenge unknown, used or expired, a bad signature, no user verification, a signature counter that went backwards, or an inactive account (one message for all; audited as a failed sign-in)',
  { error: 'passkey_refused', message: 'This passkey could not be used to sign in.' });
const locked = err('Account locked, as for /api/auth/login', { error: 'account_locked', message: 'Too many failed sign-in attempts. This account is locked; try again in 30 minutes.', remaining_minutes: 30 });
const user = { id: 7, username: 'alice', email: 'alice@example.com', role: 'user', full_name: 'Alice Example' };

/**
 * The WebAuthn ceremonies as JSON (docs/passkeys.md): registration by a signed-in user and
 * sign-in with a discoverable passkey, each an options request and a verification, all under
 * the per-IP sign-in limit; and the user's own list and removal. The sign-in page posts the
 * assertion in its form instead (src/pages/login.ts), to continue as a password sign-in does.
 */
export const PASSKEY_ROUTES = [
  route({
    method: 'post', path: '/api/passkeys/registration/options', tag: 'Passkeys', access: 'user', limit: 'login',
    summary: 'Start adding a passkey: the options for navigator.credentials.create (current password required)',
    description: 'The current password is checked as a sign-in checks it (a wrong one counts toward the lock). The options ask for a discoverable credential with user verification; the challenge is good once, for 5 minutes.',
    body: registrationOptionsSchema, example: { current_password: 'correct horse battery' },
    responses: {
      200: { description: 'The creation options as JSON, for startRegistration of @simplewebauthn/browser', schema: ceremonyOptions, example: options },
      400: invalid,
      401: err('Not signed in (`unauthenticated`) or the current password is wrong (`invalid_credentials`, with `attempts_remaining`)', { error: 'invalid_credentials', message: 'Invalid login or password.', attempts_remaining: 4 }),
      409: err('The account has the most passkeys it may have (`passkey_limit`, 10)', { error: 'passkey_limit', message: 'You have 10 passkeys, the most an account may have. Remove one first.' }),
      423: locked, 429: limited,
    },
    handle: ({ passkeys }) => async ({ req, res, body, user: me }) => {
      res.json(await passkeys.registrationOptions(me, body.current_password, ctx(req)));
    },
  }),
  route({
    method: 'post', path: '/api/passkeys/registration/verify', tag: 'Passkeys', access: 'user', limit: 'login',
    summary: 'Finish adding a passkey: the browser\'s answer to the registration, and a name for it',
    description: 'Checked by SimpleWebAuthn against the stored challenge (used up here), this service\'s origin and RP ID, with user verification required. Audited as passkey.added.',
    body: registrationVerifySchema,
    example: { name: 'Laptop', response: { id: 'Y3JlZGVudGlhbC1pZC0x', rawId: 'Y3JlZGVudGlhbC1pZC0x', type: 'public-key', response: { clientDataJSON: 'eyJ0eXBlIjoid2ViYXV0aG4uY3JlYXRlIn0', attestationObject: 'o2NmbXRkbm9uZQ' }, clientExtensionResults: {} } },
    responses: {
      201: { description: 'Added', schema: passkeyBody, example: passkey },
      400: err('Invalid body (`validation_error`), or the answer was refused (`passkey_not_registered`: wrong origin, unknown or used challenge, no user verification)', { error: 'passkey_not_registered', message: 'The passkey could not be added. Please try again.' }),
      401: unauthenticated,
      409: err('Already registered (`passkey_exists`) or the limit reached (`passkey_limit`)', { error: 'passkey_exists', message: 'This passkey is already registered.' }),
      429: limited,
    },
    handle: ({ passkeys }) => async ({ req, res, body, user: me }) => {
      res.status(201).json(passkeyJson(await passkeys.register(me, body.name, body.response, ctx(req))));
    },
  }),
  route({
    method: 'post', path: '/api/passkeys/authentication/options', tag: 'Passkeys', access: 'public', limit: 'login',
    summary: 'Start a sign-in with a passkey: the options for navigator.credentials.get (no username: discoverable credentials)',
    description: 'User verification required; the challenge is good once, for 5 minutes. The sign-in page uses these too (its button and the username field\'s autofill).',
    bodyOptional: true,
    responses: { 200: { description: 'The request options as JSON, for startAuthentication of @simplewebauthn/browser', schema: ceremonyOptions, example: options }, 429: limited },
    handle: ({ passkeys }) => async ({ res }) => {
      res.json(await passkeys.authenticationOptions());
    },
  }),
  route({
    method: 'post', path: '/api/passkeys/authentication/verify', tag: 'Passkeys', access: 'public', limit: 'login',
    summary: 'Sign in with a passkey and start a session (as POST /api/auth/login)',
    description: 'A user-verified passkey is both factors: no TOTP code is asked for, and user.login says `2fa_used: true`. Locked and inactive accounts are refused as for a password. Sets the session cookie.',
    body: authenticationVerifySchema,
    example: { response: { id: 'Y3JlZGVudGlhbC1pZC0x', rawId: 'Y3JlZGVudGlhbC1pZC0x', type: 'public-key', response: { clientDataJSON: 'eyJ0eXBlIjoid2ViYXV0aG4uZ2V0In0', authenticatorData: 'SZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2MFAAAAAQ', signature: 'MEUCIQ' }, clientExtensionResults: {} } },
    responses: {
      200: { description: 'Signed in', schema: R.sessionLogin, example: { success: true, user } },
      400: invalid, 401: refused,
      403: err('The password must be changed first (`password_change_required`)', { error: 'password_change_required', message: 'Your password must be changed before you can sign in' }),
      423: locked, 429: limited,
    },
    handle: ({ passkeys, auth }) => async ({ req, res, body }) => {
      const signedIn = await passkeys.signIn(body.response, ctx(req));
      await signOutPreviousUser(req, auth, signedIn.user, ctx(req));
      await establishSession(req, signedIn.user, { twoFactorUsed: true, credentialsVersion: signedIn.credentialsVersion });
      res.json({ success: true, user: publicUser(signedIn.user) });
    },
  }),
  route({
    method: 'get', path: '/api/user/passkeys', tag: 'Passkeys', access: 'user', limit: 'user',
    summary: 'The signed-in user\'s passkeys (name, created, last used)',
    responses: { 200: { description: 'Oldest first', schema: passkeyList, example: { passkeys: [passkey] } }, 401: unauthenticated, 429: limited },
    handle: ({ passkeys }) => async ({ res, user: me }) => {
      res.json({ passkeys: (await passkeys.list(me.id)).map(passkeyJson) });
    },
  }),
  route({
    method: 'delete', path: '/api/user/passkeys/:passkeyId', tag: 'Passkeys', access: 'user', limit: 'user', params: passkeyParams,
    summary: 'Remove one of the signed-in user\'s passkeys (audited as passkey.removed)',
    responses: {
      200: { description: 'Removed', schema: R.success, example: { success: true } },
      400: err('Malformed id', { error: 'invalid_id', message: 'The id must be a positive integer' }),
      401: unauthenticated,
      404: err('The user has no such passkey', { error: 'passkey_not_found', message: 'No such passkey' }),
      429: limited,
    },
    handle: ({ passkeys }) => async ({ req, res, params, user: me }) => {
      await passkeys.remove(me, params.passkeyId, ctx(req));
      res.json({ success: true });
    },
  }),
];
