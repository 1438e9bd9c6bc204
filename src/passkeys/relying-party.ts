import type { Config } from '../config.ts';

/** The WebAuthn relying party this service is: every ceremony is bound to it. */
export interface RelyingParty {
  /** The RP ID: the host of PUBLIC_URL (no port). */
  id: string;
  /** The origin every ceremony's client data must name: PUBLIC_URL's. */
  origin: string;
  /** What authenticators show next to the passkey. */
  name: string;
}

/**
 * The relying party from PUBLIC_URL (http://localhost:PORT when unset, as the reset links'
 * base in src/auth/password-service.ts). A browser runs WebAuthn only in a secure context:
 * https, or http on localhost (config.ts refuses a plain-http PUBLIC_URL elsewhere in production).
 */
export function relyingParty(config: Pick<Config, 'PUBLIC_URL' | 'PORT' | 'BRAND_NAME'>): RelyingParty {
  const url = new URL(config.PUBLIC_URL ?? `http://localhost:${config.PORT}`);
  return { id: url.hostname, origin: url.origin, name: config.BRAND_NAME };
}
