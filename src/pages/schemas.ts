import { z } from 'zod';
import { externalUsername } from '../links/schemas.ts';

/** `state` is opaque to us and travels back in a URL: bounded, printable, no control characters. */
const state = z.string().min(1).max(1024).regex(/^[^\p{Cc}]*$/u);
const clientId = z.string().min(1).max(200);

/** GET /sso/login: which client system, and its opaque state. Other parameters are ignored. */
export const clientLoginQuerySchema = z.object({
  client_id: clientId,
  state: state.optional(),
});

/** The client system named by a POSTed sign-in form (hidden fields). */
export const clientLoginTargetSchema = clientLoginQuerySchema;

/**
 * The sign-in form: first step login + password, second step the two-factor code with the
 * key of the pending sign-in (see pending-login.ts); or, in one step, a passkey's assertion.
 * `_csrf` is checked before this.
 */
export const loginFormSchema = z.discriminatedUnion('step', [
  z.object({
    step: z.literal('password'),
    login: z.string().trim().min(1).max(200),
    password: z.string().min(1).max(1024),
  }),
  z.object({
    step: z.literal('totp'),
    code: z.string().trim().min(1).max(64),
    pending_key: z.string().min(1).max(100),
  }),
  // the passkey's assertion (AuthenticationResponseJSON) as the page's script wrote it (src/pages/passkey-form.ts)
  z.object({
    step: z.literal('passkey'),
    passkey: z.string().min(2).max(12_000),
  }),
]);
export type LoginForm = z.infer<typeof loginFormSchema>;

/** Dashboard: link a client system with the username the user has there. */
export const linkFormSchema = z.object({
  client_id: clientId,
  external_username: externalUsername,
});

/** Account security: a TOTP code or a recovery code (to confirm, to make new codes, to turn off). */
export const securityCodeSchema = z.object({ code: z.string().trim().min(1, 'Enter the code from your authenticator app').max(64) });

/** Turning two-step verification on: the code and the current password again. */
export const securityEnableSchema = securityCodeSchema.extend({ current_password: z.string().min(1, 'Enter your current password').max(1024) });

/** Dashboard: unlink, or sign in to, one client system. */
export const clientFormSchema = z.object({ client_id: clientId });

/**
 * Where this service's own sign-in (/login) continues: only pages of this service, named
 * by path. A full URL, `//host`, a backslash or anything else is refused, so no parameter
 * can send the browser elsewhere.
 */
export const localNextSchema = z
  .string()
  .max(200)
  .regex(/^\/(dashboard|admin|account)(\/[A-Za-z0-9._~\-/]*)?(\?[A-Za-z0-9._~\-=&%]*)?$/)
  .refine((v) => !v.includes('//') && !v.includes('/.'));

/** Account security: the passkey a Remove button names in its path. */
export { passkeyParams as passkeyRemoveParams } from '../passkeys/schemas.ts';
