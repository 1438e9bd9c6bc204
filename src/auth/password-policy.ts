import { dictionary } from '@zxcvbn-ts/language-common';
import { AppError } from '../http/errors.ts';
import { MAX_PASSWORD_BYTES } from './passwords.ts';

/**
 * The ~49,000 most common passwords (zxcvbn's list, maintained upstream), lower-cased, also
 * without spaces so that "pass word 123" counts as "password123". Built once, on first use.
 */
let common: Set<string> | undefined;
function commonPasswords(): Set<string> {
  common ??= new Set(dictionary['passwords-common'].map((p) => p.toLowerCase()));
  return common;
}

/** The shortest username or address name a password is refused for containing. */
const MIN_NAME_PART = 3;

/** Whom a password is for: it must not be, or contain, their name or address. */
export interface PasswordOwner {
  username?: string | null;
  email?: string | null;
}

/**
 * Why `password` cannot be set, as a sentence that says what to fix, or null when it can.
 * The one policy of every path that sets a password (create, change, reset, administrator):
 * at least `minLength` characters, at most 72 bytes (bcrypt reads no further), not one of
 * the most common passwords, not the username or the email address, and not containing the
 * username or the email's local part (case-insensitive, when 3 characters or longer).
 */
export function passwordPolicyProblem(password: string, minLength: number, owner: PasswordOwner = {}): string | null {
  if ([...password].length < minLength) return `The password must be at least ${minLength} characters long.`;
  if (Buffer.byteLength(password, 'utf8') > MAX_PASSWORD_BYTES) {
    return `The password must be at most ${MAX_PASSWORD_BYTES} bytes long (fewer characters for accented letters or symbols).`;
  }
  const folded = password.normalize('NFKC').trim().toLowerCase();
  const list = commonPasswords();
  if (list.has(folded) || list.has(folded.replace(/\s+/g, ''))) {
    return 'This password is one of the most commonly used passwords; choose a less predictable one (a few unrelated words work well).';
  }
  const fold = (v: string | null | undefined) => (typeof v === 'string' ? v.normalize('NFKC').trim().toLowerCase() : '');
  const username = fold(owner.username);
  const email = fold(owner.email);
  if (username !== '' && username === folded) return 'The password must not be the username.';
  if (email !== '' && email === folded) return 'The password must not be the email address.';
  // a password built from the name (alice1 for alice) is among the first an attacker tries;
  // parts shorter than MIN_NAME_PART are left alone, or every password containing "al" would be refused
  if (username.length >= MIN_NAME_PART && folded.includes(username)) return 'The password must not contain the username.';
  const local = email.includes('@') ? email.slice(0, email.lastIndexOf('@')) : '';
  if (local.length >= MIN_NAME_PART && folded.includes(local)) return 'The password must not contain the first part of the email address (before the @).';
  return null;
}

/** Throws 400 `{error:"invalid_password", message}` (the message says what to fix) unless the policy allows `password`. */
export function assertPasswordAllowed(password: string, minLength: number, owner: PasswordOwner = {}): void {
  const problem = passwordPolicyProblem(password, minLength, owner);
  if (problem) throw new AppError(400, 'invalid_password', problem);
}
