import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Request } from 'express';

/** How long the second step (the two-factor code) may take after the password was right. */
const PENDING_TTL_MS = 5 * 60_000;

/**
 * A sign-in waiting for its two-factor code. The auth service checks password and code in
 * one call (so lockout, audit and events stay in one place), which means the second step
 * must present the password again without the browser resending it. It is kept split:
 * AES-256-GCM ciphertext here in the session (the database), the random key only in the
 * second-step form. Neither half alone reveals the password; the entry expires after five
 * minutes and is gone with the session id that a successful sign-in regenerates.
 */
interface PendingLogin {
  login: string;
  /** base64url of iv | tag | ciphertext */
  sealed: string;
  /** Which sign-in this belongs to (client id, or "service"), so it cannot be replayed on another. */
  target: string;
  expiresAt: number;
}

declare module 'express-session' {
  interface SessionData {
    pendingLogin?: PendingLogin;
  }
}

/**
 * Remembers a sign-in whose password was right but whose code is missing. Returns the key
 * the second-step form carries (hidden field `pending_key`); the password is not in it.
 */
export function rememberPendingLogin(req: Request, login: string, password: string, target: string): string {
  const key = randomBytes(32);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(`${target}\n${login}`));
  const body = Buffer.concat([cipher.update(password, 'utf8'), cipher.final()]);
  req.session.pendingLogin = {
    login,
    sealed: Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url'),
    target,
    expiresAt: Date.now() + PENDING_TTL_MS,
  };
  return key.toString('base64url');
}

/**
 * The pending sign-in for `target` unsealed with the form's key, or null when there is
 * none, it expired, it belongs to another sign-in, or the key does not open it.
 */
export function openPendingLogin(req: Request, keyText: string, target: string): { login: string; password: string } | null {
  const pending = req.session?.pendingLogin;
  if (!pending || pending.target !== target || pending.expiresAt < Date.now()) return null;
  const key = Buffer.from(keyText, 'base64url');
  const sealed = Buffer.from(pending.sealed, 'base64url');
  if (key.length !== 32 || sealed.length < 28) return null;
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, 12));
    decipher.setAAD(Buffer.from(`${target}\n${pending.login}`));
    decipher.setAuthTag(sealed.subarray(12, 28));
    const password = Buffer.concat([decipher.update(sealed.subarray(28)), decipher.final()]).toString('utf8');
    return { login: pending.login, password };
  } catch {
    return null;
  }
}

/** Forgets the pending sign-in (locked out, given up, or finished). */
export function forgetPendingLogin(req: Request): void {
  if (req.session?.pendingLogin) delete req.session.pendingLogin;
}
