import { createHash, randomInt } from 'node:crypto';
import { generateSecret, generateURI, verify } from 'otplib';
import QRCode from 'qrcode';

/** Seconds of clock drift accepted either side (one 30-second step), as RFC 6238 suggests. */
const DRIFT_SECONDS = 30;

/** How many recovery codes enabling two-factor hands out. */
export const RECOVERY_CODE_COUNT = 10;

/** A new random TOTP secret (20 bytes, base32). */
export function newTotpSecret(): string {
  return generateSecret();
}

/** The otpauth:// URI an authenticator app reads, and the same as a QR code (SVG). */
export async function enrollmentMaterial(secret: string, account: string, issuer: string): Promise<{ otpauth_uri: string; qr_svg: string }> {
  const otpauthUri = generateURI({ issuer, label: account, secret });
  const qrSvg = await QRCode.toString(otpauthUri, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 });
  return { otpauth_uri: otpauthUri, qr_svg: qrSvg };
}

/** True for something shaped like a TOTP code (six digits, spaces allowed). */
export function looksLikeTotp(code: string): boolean {
  return /^\d{6}$/.test(code.replace(/\s+/g, ''));
}

/**
 * The time step a TOTP code matches (now, or one step either side), or null. The caller
 * must still claim the step (claimTotpStep) so the code works only once.
 */
export async function matchTotpStep(secret: string, code: string): Promise<number | null> {
  const token = code.replace(/\s+/g, '');
  if (!/^\d{6}$/.test(token)) return null;
  const result = await verify({ secret, token, epochTolerance: DRIFT_SECONDS });
  // the TOTP strategy reports the matched step (the shared result type also covers HOTP)
  const step = result.valid ? (result as { timeStep?: unknown }).timeStep : undefined;
  return typeof step === 'number' ? step : null;
}

const RECOVERY_ALPHABET = 'abcdefghjkmnpqrstuvwxyz23456789'; // no 0/o, 1/l/i: easy to copy by hand

/**
 * Ten new recovery codes such as `k7m2p-x9qre-4hvtd-wn3ca` (20 characters from a 31-letter
 * alphabet, about 99 bits). They are random enough that SHA-256 is a sufficient hash at
 * rest (the same reasoning as client secrets), which also makes them lookup-able.
 */
export function newRecoveryCodes(): string[] {
  return Array.from({ length: RECOVERY_CODE_COUNT }, () => {
    const chars = Array.from({ length: 20 }, () => RECOVERY_ALPHABET[randomInt(RECOVERY_ALPHABET.length)]).join('');
    return chars.match(/.{5}/g)!.join('-');
  });
}

/** The stored form of a recovery code: SHA-256 of its canonical text (case, spaces and dashes ignored). */
export function hashRecoveryCode(code: string): string {
  const canonical = code.toLowerCase().replace(/[\s-]+/g, '');
  return createHash('sha256').update(canonical).digest('hex');
}
