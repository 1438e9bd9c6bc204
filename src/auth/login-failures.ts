import { writeAudit } from '../audit/writer.ts';
import type { Deps } from '../context.ts';
import type { Queryable } from '../db/db.ts';
import { accountLocked, attemptsLeft, CountedFailure, LockingFailure, refuseWhileLocked } from './login-errors.ts';
import { findLoginUser, type LoginUser, recordLoginFailure } from './queries.ts';

/** Where a sign-in or sign-out came from, for the audit log. */
export type AuthChannel = 'api' | 'page' | 'api_token' | 'client' | 'password_change' | 'totp_enable' | 'two_factor' | 'oidc' | 'passkey_add';

/** A sign-in attempt as the routes hand it over. */
export interface LoginInput {
  login: string;
  /** A passkey sign-in has none (src/passkeys/service.ts). */
  password: string;
  totp?: string;
  ipAddress: string;
  userAgent: string | null;
  via: AuthChannel;
  /**
   * The client system this sign-in is for (the sign-in page at /sso/login): a user its access
   * rule does not admit is refused (403 access_denied) once the credentials are right, audited
   * as a refused sign-in, with no session and no user.login (docs/access.md).
   */
  forClient?: { client_id: string; client_name: string };
}

/** Why a failed attempt failed (audit log and user.login_failed only; never told to the caller). */
export type FailureReason = 'unknown_user' | 'invalid_password' | 'user_inactive' | 'invalid_totp' | 'account_locked'
  /** A passkey's assertion the WebAuthn check refused (src/passkeys/service.ts). */
  | 'invalid_passkey';

/**
 * The reason as /metrics shows it. That endpoint is on a listener of its own (METRICS_PORT,
 * docs/metrics.md), but a scrape may still reach more hands than the audit log: an unknown
 * name, a wrong password and an inactive user are one label value, so a scrape before and after
 * a login does not tell whether the name exists. The audit log and user.login_failed keep the precise reason.
 */
export function metricFailureReason(reason: FailureReason): 'invalid_credentials' | 'invalid_totp' | 'account_locked' {
  return reason === 'invalid_totp' || reason === 'account_locked' ? reason : 'invalid_credentials';
}

/**
 * The bookkeeping of failed sign-ins: each one counted toward the lock of its login name,
 * audited and announced (user.login_failed, user.locked), and the answer thrown.
 */
export function createLoginFailures(deps: Pick<Deps, 'db' | 'config' | 'events' | 'metrics'>) {
  const { db, config, events, metrics } = deps;

  /** Counts a failed attempt (and maybe locks), audits it, emits the events; always throws. */
  async function fail(login: string, user: LoginUser | null, reason: FailureReason, input: LoginInput, reused = false): Promise<never> {
    const outcome = await db.transaction(async (tx) => {
      const counted = await recordLoginFailure(tx, login, config.LOCKOUT_THRESHOLD, config.LOCKOUT_MINUTES);
      await writeAudit(tx, {
        action: 'user.login', outcome: 'failure', userId: user?.id ?? null, username: login.slice(0, 200),
        ipAddress: input.ipAddress, userAgent: input.userAgent,
        details: {
          via: input.via, reason, ...(reused ? { totp_reused: true } : {}),
          ...(counted.counted ? { failed_count: counted.failedCount } : { counted: false }),
        },
      });
      await events.record(tx, 'user.login_failed', {
        username: login.slice(0, 200), user_id: user?.id ?? null, ip_address: input.ipAddress, user_agent: input.userAgent ?? '', reason,
      });
      if (counted.counted && counted.lockedUntil) await announceLock(tx, login, user, input, { failedCount: counted.failedCount, lockedUntil: counted.lockedUntil });
      return counted;
    });
    metrics.loginFailures.inc({ reason: metricFailureReason(reason) });
    if (outcome.counted && outcome.lockedUntil) metrics.lockouts.inc();
    if (!outcome.counted) {
      // a concurrent attempt locked the name while this one was being checked
      await refuseWhileLocked(db, login);
    }
    const code = reason !== 'invalid_totp' ? 'invalid_credentials' : reused ? 'totp_reused' : 'invalid_totp';
    // the attempt that locks is refused as the failed attempt it is (401), and learns of the
    // lock now, not at the next try with the right password
    if (outcome.counted && outcome.lockedUntil) throw new LockingFailure(code, config.LOCKOUT_MINUTES * 60);
    const remaining = outcome.counted ? attemptsLeft(config.LOCKOUT_THRESHOLD, outcome.failedCount) : config.LOCKOUT_THRESHOLD;
    throw new CountedFailure(code, remaining, config.LOCKOUT_MINUTES);
  }

  /** The failure that locked `login`: audited as user.locked, and announced when it is an account's. */
  async function announceLock(
    tx: Queryable,
    login: string,
    user: { id: number; email: string } | null,
    input: { ipAddress: string; userAgent: string | null; via: AuthChannel },
    counted: { failedCount: number; lockedUntil: Date },
  ): Promise<void> {
    await writeAudit(tx, {
      action: 'user.locked', outcome: 'success', userId: user?.id ?? null, username: login.slice(0, 200),
      ipAddress: input.ipAddress, userAgent: input.userAgent,
      details: { via: input.via, locked_until: counted.lockedUntil.toISOString(), failed_count: counted.failedCount },
    });
    // user.locked describes an account; a name nobody has is locked just the same, but silently
    if (user) {
      await events.record(tx, 'user.locked', {
        user_id: user.id, email: user.email, ip_address: input.ipAddress, locked_until: counted.lockedUntil.toISOString(),
      });
    }
  }

  /** An attempt while the name is locked: not counted, not checked, but audited. */
  async function refuseLocked(login: string, secondsLeft: number, input: LoginInput): Promise<never> {
    const user = await findLoginUser(db, login);
    await db.transaction(async (tx) => {
      await writeAudit(tx, {
        action: 'user.login', outcome: 'failure', userId: user?.id ?? null, username: login.slice(0, 200),
        ipAddress: input.ipAddress, userAgent: input.userAgent, details: { via: input.via, reason: 'account_locked' },
      });
      await events.record(tx, 'user.login_failed', {
        username: login.slice(0, 200), user_id: user?.id ?? null, ip_address: input.ipAddress, user_agent: input.userAgent ?? '', reason: 'account_locked',
      });
    });
    metrics.loginFailures.inc({ reason: metricFailureReason('account_locked') });
    throw accountLocked(secondsLeft);
  }

  return { fail, announceLock, refuseLocked };
}
