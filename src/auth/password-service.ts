import { createHash, randomBytes } from 'node:crypto';
import { writeAudit } from '../audit/writer.ts';
import type { Deps } from '../context.ts';
import { AppError } from '../http/errors.ts';
import type { Mailer } from '../mail/mailer.ts';
import { clearLoginAttempts } from '../users/queries.ts';
import type { UserRecord } from '../users/user.ts';
import { normalizeUsername } from '../validation/username.ts';
import { assertPasswordAllowed } from './password-policy.ts';
import {
  consumePasswordReset, deletePasswordReset, findPasswordUser, findResetCandidates, findValidReset, insertPasswordReset, storePassword, lockUserRow,
} from './password-queries.ts';
import { hashPassword } from './passwords.ts';
import { refuseWhileLocked } from './login-errors.ts';
import { credentialsNow, resetLoginFailures } from './queries.ts';
import type { AuthService } from './service.ts';
import { signOutEverywhere } from './sign-out.ts';

/** Where a password request came from, for the audit log. */
export interface PasswordContext {
  ipAddress: string;
  userAgent: string | null;
  /** api or page */
  via: 'api' | 'page';
}

/** Who is changing their password: a signed-in user (or one a must-change sign-in let through), or a name with its credentials. */
export type PasswordChanger = { userId: number } | { login: string; totp?: string };

const invalidResetToken = () => new AppError(400, 'invalid_reset_token', 'This reset link is invalid, used or expired; ask for a new one');

/** Reset tokens are 32 random bytes, base64url: 43 characters. */
const TOKEN_SHAPE = /^[A-Za-z0-9_-]{43}$/;

/** The stored form of a reset token: it is random enough that SHA-256 suffices (as for client secrets). */
export function hashResetToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** The reset mail's text. */
function resetMessage(user: UserRecord, link: string, ttlSeconds: number): { subject: string; text: string } {
  const minutes = Math.round(ttlSeconds / 60);
  const lifetime = ttlSeconds < 120 ? `${ttlSeconds} seconds` : minutes < 120 ? `${minutes} minutes` : `${Math.round(minutes / 60)} hours`;
  return {
    subject: 'Reset your password',
    text: [
      `Hello ${user.full_name || user.username},`,
      '',
      `someone (hopefully you) asked to reset the password of the account "${user.username}".`,
      'Open this link to choose a new password:',
      '',
      link,
      '',
      `The link works once, for ${lifetime}. If you did not ask for it, ignore this message: your password stays as it is.`,
    ].join('\n'),
  };
}

/**
 * Passwords for life: change (proving the current one), reset by email, and the background
 * work of forgot-password requests, which runs after the answer has left so that known and
 * unknown names answer alike and in the same time.
 */
export function createPasswordService(deps: Pick<Deps, 'db' | 'config' | 'events' | 'logger'> & { auth: AuthService; mailer: Mailer }) {
  const { db, config, events, logger, auth, mailer } = deps;
  const running = new Set<Promise<void>>();
  const publicUrl = (config.PUBLIC_URL ?? `http://localhost:${config.PORT}`).replace(/\/+$/, '');

  async function sendResetLinks(login: string, ctx: PasswordContext): Promise<void> {
    const users = await findResetCandidates(db, normalizeUsername(login), login.trim());
    if (users.length === 0) {
      await writeAudit(db, {
        action: 'user.password_reset_request', outcome: 'failure', username: normalizeUsername(login).slice(0, 200),
        ipAddress: ctx.ipAddress, userAgent: ctx.userAgent, details: { via: ctx.via, reason: 'unknown_user' },
      });
      return;
    }
    let failed: unknown; // the first mail the server did not take; the other accounts still get theirs
    for (const user of users) {
      const token = randomBytes(32).toString('base64url');
      const made = await db.transaction(async (tx) => {
        const created = await insertPasswordReset(tx, user.id, hashResetToken(token), config.PASSWORD_RESET_TTL, config.PASSWORD_RESET_INTERVAL);
        const refused = typeof created === 'string' ? created : null;
        await writeAudit(tx, {
          action: 'user.password_reset_request', outcome: refused ? 'failure' : 'success', userId: user.id, username: user.username,
          ipAddress: ctx.ipAddress, userAgent: ctx.userAgent, details: { via: ctx.via, ...(refused ? { reason: refused } : {}) },
        });
        return typeof created === 'string' ? null : created;
      });
      // a link went out less than PASSWORD_RESET_INTERVAL ago (it still works, no second mail),
      // or the user was deactivated or lost their address since they were found
      if (!made) continue;
      const link = `${publicUrl}/reset-password?token=${token}`;
      try {
        // the address as it is now, read under the user's row lock with the link
        await mailer.send({ to: made.email, ...resetMessage(user, link, config.PASSWORD_RESET_TTL) });
      } catch (err) {
        failed ??= err;
        await withdrawResetLink(user, token, ctx);
      }
    }
    if (failed) throw failed;
  }

  /**
   * A link whose mail the server did not take is taken back: its row would count as a link
   * sent (a request within PASSWORD_RESET_INTERVAL is refused as `recently_sent`), so the
   * user, who got nothing, could not ask again. Audited as a failed request (`mail_failed`).
   */
  async function withdrawResetLink(user: { id: number; username: string }, token: string, ctx: PasswordContext): Promise<void> {
    await db.transaction(async (tx) => {
      await deletePasswordReset(tx, hashResetToken(token));
      await writeAudit(tx, {
        action: 'user.password_reset_request', outcome: 'failure', userId: user.id, username: user.username,
        ipAddress: ctx.ipAddress, userAgent: ctx.userAgent, details: { via: ctx.via, reason: 'mail_failed' },
      });
    });
  }

  return {
    /** Whether reset mail can be sent at all (false: production without SMTP_URL). */
    get mailAvailable(): boolean {
      return mailer.available;
    },

    /**
     * Changes a password after proving the current one. A wrong current password is a failed
     * sign-in (counted toward the lockout, audited, user.login_failed); a locked name is 423.
     * With `login`, two-factor users must give their code too. On success every other session
     * ends (`keepSid` is renewed by the caller: renewSessionAfterChange), access tokens issued before are refused, unused SSO tokens are
     * invalidated (user.logout), reset links die, and user.password_change is audited. Answers
     * the user with the new version of their credentials (a session started now carries it).
     */
    async change(
      who: PasswordChanger, currentPassword: string, newPassword: string, ctx: PasswordContext, keepSid?: string,
    ): Promise<{ user: UserRecord; credentialsVersion: string }> {
      let login: string;
      if ('userId' in who) {
        const user = await findPasswordUser(db, who.userId);
        if (!user?.active) throw new AppError(401, 'unauthenticated', 'Sign in first');
        login = user.username;
      } else {
        login = who.login;
      }
      const input = { login, password: currentPassword, totp: 'totp' in who ? who.totp : undefined, ipAddress: ctx.ipAddress, userAgent: ctx.userAgent, via: 'password_change' as const };
      // what the policy says of the new password alone first, before the credentials are checked
      if (newPassword === currentPassword) throw new AppError(400, 'invalid_password', 'The new password must differ from the current one.');
      assertPasswordAllowed(newPassword, config.PASSWORD_MIN_LENGTH);
      const { user, code } = await auth.checkCredentials(input, { secondFactor: !('userId' in who) });
      assertPasswordAllowed(newPassword, config.PASSWORD_MIN_LENGTH, user); // and of it beside the user's name and email, for the user only
      const hash = await hashPassword(newPassword, config.BCRYPT_COST);
      const credentialsVersion = await db.transaction(async (tx) => {
        // a lock set by a concurrent failure while the new password was hashed still wins
        await refuseWhileLocked(tx, user.username);
        // the current password was checked before bcrypt's quarter of a second: a change that
        // committed meanwhile (another of these at once, a reset) made it no longer current
        await lockUserRow(tx, user.id);
        const now = await credentialsNow(tx, user.id, user.password_hash);
        if (now.state === 'password_changed') throw new AppError(401, 'invalid_credentials', 'The current password was changed meanwhile; sign in with the new one.');
        if (now.state === 'inactive') throw new AppError(401, 'unauthenticated', 'Sign in first');
        // the code given is used up with the change, or not at all
        if (code && !(await code.spend(tx))) return null;
        await storePassword(tx, user.id, hash, false);
        await resetLoginFailures(tx, user.username);
        await writeAudit(tx, {
          action: 'user.password_change', outcome: 'success', userId: user.id, username: user.username,
          ipAddress: ctx.ipAddress, userAgent: ctx.userAgent, details: { via: ctx.via },
        });
        return (await signOutEverywhere(tx, events, user, { ...ctx, reason: 'password_change' }, keepSid, { renewing: true })).credentialsVersion;
      });
      if (credentialsVersion === null) return code!.refuse();
      const { password_hash: _h, totp_secret: _s, totp_last_step: _t, must_change_password: _m, ...record } = user;
      return { user: record, credentialsVersion };
    },

    /**
     * A forgot-password request: 503 email_not_configured when no mail can be sent;
     * otherwise the lookup, the new token and the mail run in the background and the caller
     * answers 202 at once, whatever the name.
     */
    requestReset(login: string, ctx: PasswordContext): void {
      if (!mailer.available) {
        throw new AppError(503, 'email_not_configured', 'Password reset by email is not available; an administrator must reset the password');
      }
      const work = sendResetLinks(login, ctx)
        .catch((err: unknown) => logger.error({ err }, 'password reset mail failed')) // type, message, code and stack (safeError)
        .finally(() => running.delete(work));
      running.add(work);
    },

    /** Whether a reset token can still be used (the page shows the form only then); it is not used up. */
    async resetTokenValid(token: string): Promise<boolean> {
      return TOKEN_SHAPE.test(token) && (await findValidReset(db, hashResetToken(token))) !== null;
    },

    /**
     * Sets a new password with a reset token: 400 invalid_reset_token for a used, expired or
     * unknown one (a password the policy refuses leaves the token usable). The token is used
     * up in one statement; the lockout is cleared, the user is signed out everywhere, and
     * user.password_reset is audited.
     */
    async reset(token: string, newPassword: string, ctx: PasswordContext): Promise<UserRecord> {
      if (!TOKEN_SHAPE.test(token)) throw invalidResetToken();
      const tokenHash = hashResetToken(token);
      const userId = await findValidReset(db, tokenHash);
      const user = userId === null ? null : await findPasswordUser(db, userId);
      if (!user?.active) throw invalidResetToken();
      assertPasswordAllowed(newPassword, config.PASSWORD_MIN_LENGTH, user);
      const hash = await hashPassword(newPassword, config.BCRYPT_COST);
      await db.transaction(async (tx) => {
        // the user's row first, as every other writer of the user's password and links does:
        // two links used at once then wait in turn (the second finds its link gone) instead of
        // each holding its link and waiting for the other's user row (a deadlock)
        // and deactivated meanwhile: refused as before the hash (its links die with the deactivation)
        if (!(await lockUserRow(tx, user.id))?.active) throw invalidResetToken();
        if ((await consumePasswordReset(tx, tokenHash)) !== user.id) throw invalidResetToken();
        await storePassword(tx, user.id, hash, false);
        await clearLoginAttempts(tx, user.username);
        await writeAudit(tx, {
          action: 'user.password_reset', outcome: 'success', userId: user.id, username: user.username,
          ipAddress: ctx.ipAddress, userAgent: ctx.userAgent, details: { via: ctx.via, unlocked: true },
        });
        await signOutEverywhere(tx, events, user, { ...ctx, reason: 'password_reset' });
      });
      const { password_hash: _h, must_change_password: _m, ...record } = user;
      return record;
    },

    /** Waits for background reset requests still running (shutdown). */
    async drain(): Promise<void> {
      while (running.size > 0) await Promise.allSettled([...running]);
    },
  };
}

export type PasswordService = ReturnType<typeof createPasswordService>;
