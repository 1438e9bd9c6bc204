import type { AuthenticationResponseJSON } from '@simplewebauthn/server';
import { passkeyRefused } from '../passkeys/service.ts';
import { authenticationResponseSchema } from '../passkeys/schemas.ts';

/**
 * The passkey assertion the sign-in form carries in its `passkey` field: the JSON that
 * @simplewebauthn/browser's startAuthentication answered (public/js/passkey-login.js). Its
 * shape is checked here; its contents by SimpleWebAuthn. Anything else is the one refusal of
 * a passkey sign-in (401 passkey_refused).
 */
export function passkeyAssertion(field: string): AuthenticationResponseJSON {
  let value: unknown;
  try {
    value = JSON.parse(field);
  } catch {
    throw passkeyRefused();
  }
  const parsed = authenticationResponseSchema.safeParse(value);
  if (!parsed.success) throw passkeyRefused();
  return parsed.data as AuthenticationResponseJSON;
}
