import { writeAudit } from '../audit/writer.ts';
import type { Queryable } from '../db/db.ts';
import { actorDetails, type Actor } from '../audit/actor.ts';
import type { Deps } from '../context.ts';
import { AppError } from '../http/errors.ts';
import { normalizeUsername } from '../validation/username.ts';
import { accountLocked, CountedFailure, LockingFailure } from './login-errors.ts';
import { lockUserRow } from './password-queries.ts';
import type { UserRecord } from '../users/user.ts';
import {
  activeLock, claimTotpStep, consumeRecoveryCode, countUnusedRecoveryCodes, findTotpState, recoveryCodeUnused, replaceRecoveryCodes,
  setTotpEnabled, totpStepUnused,
} from './queries.ts';
import { signOutEverywhere } from './sign-out.ts';
import { deletePendingTotp, enableTotpWith, findPendingTotp, savePendingTotp } from './totp-pending-queries.ts';
import { enrollmentMaterial, hashRecoveryCode, looksLikeTotp, matchTotpStep, newRecoveryCodes, newTotpSecret } from './totp.ts';

/** A right code, checked but not yet used up: `spend` uses it up in the caller's transaction (false: used meanwhile). */
export interface MatchedCode {
  kind: 'totp' | 'recovery';
  spend(tx: Queryable): Promise<boolean>;
}

/** Who is changing their two-factor settings, for the audit log. */
export interface TwoFactorContext {
  ipAddress: string;
  userAgent: string | null;
}

/**
 * The credential a setup is started and confirmed with: the browser session or the access
 * token (src/http/auth-guards.ts, credentialOf). A pending setup belongs to it.
 */
export type SetupOwner = { kind: 'session'; sid: string } | { kind: 'token'; jti: string };

const ownerKey = (owner: SetupOwner) => (owner.kind === 'session' ? `session:${owner.sid}` : `token:${owner.jti}`);

/** How long a setup may wait for the code that confirms it. */
export const TOTP_SETUP_TTL_SECONDS = 10 * 60;

const invalidCode = () => new AppError(400, 'invalid_totp', 'The two-factor code is invalid');
const reusedCode = () => new AppError(400, 'totp_reused', 'That code was already used. Wait for the next code from your authenticator app.');

/** The refusals of a code (wrong, or a TOTP code already used), audited as failures. */
const CODE_REFUSALS = new Set(['invalid_totp', 'totp_reused']);

/**
 * How a refused code of a signed-in user counts toward the sign-in lockout, whose counter
 * src/auth/service.ts keeps: as a failed sign-in of the name.
 */
export interface CodeGuard {
  /**
   * Counts a refused code toward the lock: `locked` when this one set it (audited and
   * announced), else the failed attempts left before the lock (null: not counted, the name
   * was locked meanwhile).
   */
  countRefusal(tx: Queryable, user: Pick<UserRecord, 'id' | 'username' | 'email'>, ctx: TwoFactorContext): Promise<{ locked: boolean; attemptsRemaining: number | null }>;
}

/** TOTP (RFC 6238) enrollment, codes that work once, and single-use recovery codes. */
export function createTwoFactor(deps: Pick<Deps, 'db' | 'config' | 'events'>, guard: CodeGuard) {
  const { db, config, events } = deps;

  /**
   * Accepts a TOTP code (its time step claimed, so it works once) or an unused recovery
   * code (marked used), in `q`. Returns which one matched; 'reused' for a right TOTP code
   * whose time step was already used (the user should wait for the next code); null for a
   * wrong one. Each check is one atomic statement, so two concurrent uses of one code cannot
   * both succeed.
   */
  async function checkCodeDetailed(q: Queryable, user: { id: number; totp_secret: string | null }, code: string): Promise<'totp' | 'recovery' | 'reused' | null> {
    if (looksLikeTotp(code)) {
      if (!user.totp_secret) return null;
      const step = await matchTotpStep(user.totp_secret, code);
      if (step === null) return null;
      return (await claimTotpStep(q, user.id, step)) ? 'totp' : 'reused';
    }
    if (code.length > 64) return null;
    return (await consumeRecoveryCode(q, user.id, hashRecoveryCode(code))) ? 'recovery' : null;
  }

  /**
   * As checkCodeDetailed for a sign-in, whose success commits later in a transaction of its
   * own: the code is checked now and used up only by `spend`, run in that transaction, so a
   * sign-in refused after the check (a lock set meanwhile, credentials changed meanwhile) or
   * whose transaction is lost (an outage) leaves the code as it was. `spend` answers false
   * when a concurrent use took the code between the check and the spending.
   */
  async function matchCode(q: Queryable, user: { id: number; totp_secret: string | null }, code: string): Promise<MatchedCode | 'reused' | null> {
    if (looksLikeTotp(code)) {
      if (!user.totp_secret) return null;
      const step = await matchTotpStep(user.totp_secret, code);
      if (step === null) return null;
      if (!(await totpStepUnused(q, user.id, step))) return 'reused';
      return { kind: 'totp', spend: (tx) => claimTotpStep(tx, user.id, step) };
    }
    if (code.length > 64) return null;
    const hash = hashRecoveryCode(code);
    if (!(await recoveryCodeUnused(q, user.id, hash))) return null;
    return { kind: 'recovery', spend: (tx) => consumeRecoveryCode(tx, user.id, hash) };
  }

  /**
   * For a change to a user's two-factor settings: two-factor is on (409 totp_not_enabled
   * otherwise) and `code` is a current TOTP code or an unused recovery code, which it uses
   * up (401 as for a sign-in otherwise). Returns which kind the code was.
   */
  async function proveEnabledFactor(tx: Queryable, user: Pick<UserRecord, 'id'>, code: string): Promise<'totp' | 'recovery'> {
    const state = await findTotpState(tx, user.id);
    if (!state?.totp_enabled) throw new AppError(409, 'totp_not_enabled', 'Two-factor authentication is not enabled');
    const factor = await checkCodeDetailed(tx, { id: user.id, totp_secret: state.totp_secret }, code);
    if (factor === 'reused') throw reusedCode();
    if (!factor) throw invalidCode();
    return factor;
  }

  /**
   * Runs a change that a code must prove, in one transaction that first takes the user's row
   * (as a sign-in's success and a password change do, before the sign-in counter): the changes
   * a code proves for one user run one at a time, each reads the lock of the user's name (423
   * while it is locked: no code is checked, the refusal audited) and checks its code under it,
   * and a refused code is audited (as `action`, outcome failure) and counted toward that lock
   * before the next change can read it. So a stolen session cannot guess codes to turn
   * two-factor off or to make recovery codes of its own any faster than a sign-in could, not
   * even with requests sent at once. A refusal says, as a sign-in's does, how many attempts
   * are left (`attempts_remaining`, and a warning before the last); the one that sets the lock
   * is the code's own refusal saying so (LockingFailure), and 423 comes after it. `change`
   * throws its refusals before it writes anything: the transaction commits the audit and the
   * count.
   */
  async function auditRefusedCode<T>(action: string, user: Pick<UserRecord, 'id' | 'username' | 'email'>, ctx: TwoFactorContext, change: (tx: Queryable) => Promise<T>): Promise<T> {
    const login = normalizeUsername(user.username);
    const failure = (tx: Queryable, reason: string) => writeAudit(tx, { action, outcome: 'failure', userId: user.id, username: user.username, ...ctx, details: { reason } });
    const outcome = await db.transaction(async (tx): Promise<{ done: T } | { refused: AppError }> => {
      await lockUserRow(tx, user.id);
      const lock = await activeLock(tx, login);
      if (lock) {
        await failure(tx, 'account_locked');
        return { refused: accountLocked(lock.remaining_seconds) };
      }
      try {
        return { done: await change(tx) };
      } catch (err) {
        if (!(err instanceof AppError && CODE_REFUSALS.has(err.code))) throw err;
        await failure(tx, err.code);
        const counted = await guard.countRefusal(tx, user, ctx);
        if (counted.locked) return { refused: new LockingFailure(err.code, config.LOCKOUT_MINUTES * 60, { status: err.status, message: err.message }) };
        if (counted.attemptsRemaining === null) { // not counted: a failure elsewhere locked the name meanwhile
          const since = await activeLock(tx, login);
          return { refused: since ? accountLocked(since.remaining_seconds) : err };
        }
        return { refused: new CountedFailure(err.code, counted.attemptsRemaining, config.LOCKOUT_MINUTES, { status: err.status, message: err.message }) };
      }
    });
    if ('done' in outcome) return outcome.done;
    throw outcome.refused;
  }

  return {
    matchCode,

    /**
     * Starts enrollment: a new secret (replacing any unconfirmed one of `owner`), its
     * otpauth:// URI and a QR code. The secret belongs to `owner` (the session or access token
     * that asked) for TOTP_SETUP_TTL_SECONDS: only it is shown the secret again and may turn it
     * on. Two-factor stays off until `enable` sees a valid code.
     */
    async startSetup(user: UserRecord, ctx: TwoFactorContext, owner: SetupOwner): Promise<{ secret: string; otpauth_uri: string; qr_svg: string }> {
      const secret = newTotpSecret();
      await db.transaction(async (tx) => {
        if (!(await savePendingTotp(tx, user.id, ownerKey(owner), secret, TOTP_SETUP_TTL_SECONDS))) {
          throw new AppError(409, 'totp_already_enabled', 'Two-factor authentication is already enabled');
        }
        await writeAudit(tx, { action: 'user.2fa_setup', outcome: 'success', userId: user.id, username: user.username, ...ctx });
      });
      return { secret, ...(await enrollmentMaterial(secret, user.username, config.ISSUER)) };
    },

    /**
     * Turns two-factor on after one valid code from the setup `owner` started (another
     * session's or token's setup, or one expired, is as none: 409 totp_setup_required); returns
     * ten recovery codes, shown this once (only their hashes are kept). Every other session of
     * the user ends and every access token stops working, as a sign-out everywhere (one made
     * before two-factor was on must not outlive it); the owner's session stays (an access token
     * asking gets `credentialsVersion` for its successor). Emits user.2fa_enabled.
     */
    async enable(user: UserRecord, code: string, ctx: TwoFactorContext, owner: SetupOwner): Promise<{ recovery_codes: string[]; credentialsVersion: string }> {
      const codes = newRecoveryCodes();
      const credentialsVersion = await auditRefusedCode('user.2fa_enable', user, ctx, async (tx) => {
        // locked: a setup of this owner at the same moment (a new secret) waits, so the secret
        // turned on is the one the code was checked against, the one the user's app holds
        const state = await findTotpState(tx, user.id, { lock: true });
        if (state?.totp_enabled) throw new AppError(409, 'totp_already_enabled', 'Two-factor authentication is already enabled');
        const secret = await findPendingTotp(tx, user.id, ownerKey(owner), { lock: true });
        if (!secret) throw new AppError(409, 'totp_setup_required', 'Start with POST /api/user/2fa/setup (a setup lasts 10 minutes, in the session or with the token that started it)');
        if (!looksLikeTotp(code)) throw invalidCode();
        const step = await matchTotpStep(secret, code);
        if (step === null) throw invalidCode();
        await enableTotpWith(tx, user.id, secret, step);
        await deletePendingTotp(tx, user.id);
        await replaceRecoveryCodes(tx, user.id, codes.map(hashRecoveryCode));
        await writeAudit(tx, { action: 'user.2fa_enable', outcome: 'success', userId: user.id, username: user.username, ...ctx });
        await events.record(tx, 'user.2fa_enabled', { user_id: user.id, email: user.email });
        const signedOut = await signOutEverywhere(tx, events, user, { ...ctx, via: 'two_factor', reason: 'two_factor_enabled' }, owner.kind === 'session' ? owner.sid : undefined);
        return signedOut.credentialsVersion;
      });
      return { recovery_codes: codes, credentialsVersion };
    },

    /**
     * An administrator turns two-factor off for a user who lost their device: secret and
     * recovery codes forgotten, audited as user.2fa_reset with the administrator.
     */
    async reset(user: { id: number; username: string }, actor: Actor): Promise<void> {
      await db.transaction(async (tx) => {
        // what is turned off is what the row holds once locked: an enabling committed while
        // this waited counts (the record the caller read may be older)
        const wasEnabled = (await findTotpState(tx, user.id, { lock: true }))?.totp_enabled ?? false;
        await setTotpEnabled(tx, user.id, false);
        await writeAudit(tx, {
          action: 'user.2fa_reset', outcome: 'success', userId: user.id, username: user.username,
          ipAddress: actor.ipAddress ?? null, userAgent: actor.userAgent ?? null,
          details: { ...actorDetails(actor), was_enabled: wasEnabled },
        });
      });
    },

    /** Turns two-factor off given a current code or a recovery code; forgets the secret and the codes. */
    async disable(user: UserRecord, code: string, ctx: TwoFactorContext): Promise<void> {
      await auditRefusedCode('user.2fa_disable', user, ctx, async (tx) => {
        const factor = await proveEnabledFactor(tx, user, code);
        await setTotpEnabled(tx, user.id, false);
        await writeAudit(tx, { action: 'user.2fa_disable', outcome: 'success', userId: user.id, username: user.username, ...ctx, details: { with: factor } });
      });
    },

    /**
     * Replaces the recovery codes with ten new ones (the old ones stop working), given a
     * current TOTP code or an unused recovery code; the new codes are shown this once.
     */
    async regenerateRecoveryCodes(user: UserRecord, code: string, ctx: TwoFactorContext): Promise<{ recovery_codes: string[] }> {
      const codes = newRecoveryCodes();
      await auditRefusedCode('user.2fa_recovery_codes', user, ctx, async (tx) => {
        const factor = await proveEnabledFactor(tx, user, code);
        await replaceRecoveryCodes(tx, user.id, codes.map(hashRecoveryCode));
        await writeAudit(tx, { action: 'user.2fa_recovery_codes', outcome: 'success', userId: user.id, username: user.username, ...ctx, details: { with: factor } });
      });
      return { recovery_codes: codes };
    },

    /**
     * The enrollment `owner` started with `startSetup` and has not yet confirmed (secret,
     * otpauth URI, QR code), so its page can show it again until a code confirms it or it
     * expires; null when none (another session's setup is never shown).
     */
    async pendingSetup(user: UserRecord, owner: SetupOwner): Promise<{ secret: string; otpauth_uri: string; qr_svg: string } | null> {
      const secret = await findPendingTotp(db, user.id, ownerKey(owner));
      return secret ? { secret, ...(await enrollmentMaterial(secret, user.username, config.ISSUER)) } : null;
    },

    /** Whether the user has two-factor on, and how many unused recovery codes are left. */
    async status(user: Pick<UserRecord, 'id'>): Promise<{ totp_enabled: boolean; recovery_codes_left: number }> {
      const state = await findTotpState(db, user.id);
      return { totp_enabled: state?.totp_enabled === true, recovery_codes_left: state?.totp_enabled ? await countUnusedRecoveryCodes(db, user.id) : 0 };
    },
  };
}

export type TwoFactor = ReturnType<typeof createTwoFactor>;
