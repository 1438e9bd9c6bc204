import { z } from 'zod';

/** base64url as WebAuthn's JSON forms carry binary values (@simplewebauthn/browser's output). */
const b64url = (max: number) => z.string().min(1).max(max).regex(/^[A-Za-z0-9_-]+$/, 'must be base64url');

const transports = z.array(z.enum(['ble', 'cable', 'hybrid', 'internal', 'nfc', 'smart-card', 'usb'])).max(7);

/**
 * The browser's answer to a registration (RegistrationResponseJSON), its shape only: every
 * value in it is checked by SimpleWebAuthn (src/passkeys/service.ts), nothing parsed here.
 */
export const registrationResponseSchema = z.looseObject({
  id: b64url(1366),
  rawId: b64url(1366),
  type: z.literal('public-key'),
  response: z.looseObject({
    clientDataJSON: b64url(4096),
    attestationObject: b64url(8192),
    transports: transports.optional(),
  }),
  clientExtensionResults: z.record(z.string(), z.unknown()).default({}),
  authenticatorAttachment: z.enum(['platform', 'cross-platform']).optional(),
});

/** The browser's answer to a sign-in (AuthenticationResponseJSON), its shape only (as above). */
export const authenticationResponseSchema = z.looseObject({
  id: b64url(1366),
  rawId: b64url(1366),
  type: z.literal('public-key'),
  response: z.looseObject({
    clientDataJSON: b64url(4096),
    authenticatorData: b64url(4096),
    signature: b64url(2048),
    userHandle: b64url(1024).optional(),
  }),
  clientExtensionResults: z.record(z.string(), z.unknown()).default({}),
  authenticatorAttachment: z.enum(['platform', 'cross-platform']).optional(),
});

/** What a user calls a passkey: 1 to 64 characters, no control characters (the database checks the same). */
export const passkeyName = z.string().trim().min(1, 'Name the passkey').max(64, 'At most 64 characters').regex(/^[^\p{Cc}]*$/u, 'No control characters');

/** POST /api/passkeys/registration/options: the current password again, as turning two-step verification on asks. */
export const registrationOptionsSchema = z.object({ current_password: z.string().min(1, 'Enter your current password').max(1024) });

/** POST /api/passkeys/registration/verify. */
export const registrationVerifySchema = z.object({ name: passkeyName, response: registrationResponseSchema });

/** POST /api/passkeys/authentication/verify. */
export const authenticationVerifySchema = z.object({ response: authenticationResponseSchema });

/** A passkey's id in a path. */
const positiveId = z.string().regex(/^[1-9]\d{0,8}$/).transform(Number);
export const passkeyParams = z.object({ passkeyId: positiveId });

/** A user's and one of their passkeys' ids in a path (administrators). */
export const userPasskeyParams = z.object({ id: positiveId, passkeyId: positiveId });

/** A user's id in a path (administrators). */
export const userParams = z.object({ id: positiveId });

/** A passkey in answers. */
export const passkeyBody = z.object({
  id: z.number().int(),
  name: z.string(),
  created_at: z.string().describe('ISO 8601'),
  last_used_at: z.string().nullable().describe('ISO 8601; null until first used'),
});

export const passkeyList = z.object({ passkeys: z.array(passkeyBody) });

/** Options for navigator.credentials.create/get, as SimpleWebAuthn makes them (passed to @simplewebauthn/browser as they are). */
export const ceremonyOptions = z.looseObject({ challenge: z.string() });

/** A passkey as answers show it. */
export function passkeyJson(p: { id: number; name: string; created_at: Date; last_used_at: Date | null }) {
  return { id: p.id, name: p.name, created_at: p.created_at.toISOString(), last_used_at: p.last_used_at?.toISOString() ?? null };
}
