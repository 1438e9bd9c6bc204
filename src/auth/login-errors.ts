import type { Queryable } from '../db/db.ts';
import { AppError } from '../http/errors.ts';
import { activeLock } from './queries.ts';

// The answers of a refused sign-in: what the caller is told, on the API and the pages alike.

/**
 * 403 password_change_required: the credentials were right, but an administrator asked for a
 * new password first. The body says how to change it; `userId` is for the sign-in page, which
 * continues to its change form.
 */
export class PasswordChangeRequired extends AppError {
  readonly userId: number;
  readonly twoFactorUsed: boolean;
  constructor(userId: number, twoFactorUsed: boolean) {
    // a code is good for one use: the one this sign-in gave is spent, the change needs the next
    const message = twoFactorUsed
      ? 'Your password must be changed before you can sign in. The two-factor code you gave is used up: send the next one with the change'
      : 'Your password must be changed before you can sign in';
    super(403, 'password_change_required', message, {
      extra: {
        change_password: {
          method: 'POST', path: '/api/user/password',
          body: ['login', 'current_password', 'new_password', twoFactorUsed ? 'totp (the next code, or a recovery code)' : 'totp (two-factor users)'],
          page: '/account/password',
        },
      },
    });
    this.userId = userId;
    this.twoFactorUsed = twoFactorUsed;
  }
}

const minutes = (n: number) => `${n} minute${n === 1 ? '' : 's'}`;

/**
 * A counted failure: 401 with how many attempts are left before the lock (the counter runs
 * per login name, known or not, so this tells nothing about whether the name exists). The
 * attempt before the lock says so: `warning` is that sentence ('' otherwise), ending the
 * message here and the pages' own wording of the refusal.
 */
export class CountedFailure extends AppError {
  readonly warning: string;
  /**
   * `refusal` is the answer's own status and words where they are not a sign-in's: a code
   * refused when a signed-in user changes their two-factor settings (400, src/auth/two-factor.ts)
   * counts toward the same lock.
   */
  constructor(code: string, attemptsRemaining: number, lockMinutes: number, refusal?: { status: number; message: string }) {
    const base = refusal ? refusal.message.replace(/\.?$/, '.') : SIGN_IN_REFUSALS[code] ?? 'Invalid login or password.';
    const warning = attemptsRemaining === 1 ? `One more failed attempt locks the account for ${minutes(lockMinutes)}.` : '';
    super(refusal?.status ?? 401, code, warning ? `${base} ${warning}` : base, { extra: { attempts_remaining: attemptsRemaining } });
    this.warning = warning;
  }
}

const SIGN_IN_REFUSALS: Record<string, string> = {
  invalid_credentials: 'Invalid login or password.',
  invalid_totp: 'The two-factor code is invalid.',
  totp_reused: 'That code was already used to sign in. Wait for the next code from your authenticator app.',
};

/**
 * The failed attempt that sets the lock: a refusal like any other of its kind (401 for a
 * sign-in's wrong password or code, as SPEC 4.5 and 7 say of invalid credentials; a settings
 * change's own status for a refused code), whose body says that the account is now locked and
 * for how long (`locked: true`, `remaining_minutes`, `attempts_remaining: 0`; Retry-After in
 * seconds). Only the attempts after it answer 423 account_locked (SPEC 3.1: "further login
 * attempts").
 */
export class LockingFailure extends AppError {
  /** The sentence the pages add to their own wording of the refusal. */
  readonly warning: string;
  constructor(code: string, lockSeconds: number, refusal?: { status: number; message: string }) {
    const remainingMinutes = Math.ceil(lockSeconds / 60);
    const base = refusal ? refusal.message.replace(/\.?$/, '.') : SIGN_IN_REFUSALS[code] ?? 'Invalid login or password.';
    const warning = `Too many failed attempts: this account is now locked for ${minutes(remainingMinutes)}.`;
    super(refusal?.status ?? 401, code, `${base} ${warning}`, {
      extra: { attempts_remaining: 0, locked: true, remaining_minutes: remainingMinutes },
      headers: { 'Retry-After': String(lockSeconds) },
    });
    this.warning = warning;
  }
}

/** Failed attempts left before the lock after `failedCount` counted failures (a counted one that did not lock leaves at least one). */
export function attemptsLeft(threshold: number, failedCount: number): number {
  return Math.max(1, threshold - failedCount);
}

/**
 * The lock warning of a refusal, with a space before it: on the attempt before the lock that
 * one more locks, on the attempt that locks that the account is now locked ('' otherwise).
 */
export function lockWarning(err: unknown): string {
  return (err instanceof CountedFailure || err instanceof LockingFailure) && err.warning ? ` ${err.warning}` : '';
}

/**
 * 423 account_locked for a lock with `seconds` left: Retry-After says them, the body the whole
 * minutes (rounded up). (The attempt that set the lock is a LockingFailure, not this.)
 */
export function accountLocked(seconds: number): AppError {
  const remainingMinutes = Math.ceil(seconds / 60);
  const message = `Too many failed sign-in attempts. This account is locked; try again in ${minutes(remainingMinutes)}.`;
  return new AppError(423, 'account_locked', message, {
    extra: { remaining_minutes: remainingMinutes },
    headers: { 'Retry-After': String(seconds) },
  });
}

/** 423 account_locked, with the minutes left, while `login` (normalized) is locked. */
export async function refuseWhileLocked(q: Queryable, login: string): Promise<void> {
  const lock = await activeLock(q, login);
  if (lock) throw accountLocked(lock.remaining_seconds);
}
