import { writeAudit } from '../audit/writer.ts';
import type { Queryable } from '../db/db.ts';
import type { Deps } from '../context.ts';
import { AppError } from '../http/errors.ts';
import { invalidateUnusedTokens } from '../sso/queries.ts';
import { tokenOwnerForLogout } from '../sso/logout-owner.ts';
import { accessDenied } from '../sso/service.ts';
import { admitSignIn } from '../access/service.ts';
import { findUserById } from '../users/queries.ts';
import type { ClientRecord } from '../clients/client.ts';
import type { UserRecord } from '../users/user.ts';
import { normalizeUsername } from '../validation/username.ts';
import { type AccessTokenClaims, signAccessToken, verifyAccessTokenClaims } from './access-token.ts';
import { findTokenUser, lockUserRow, revokeAccessToken } from './password-queries.ts';
import { MAX_PASSWORD_BYTES, prepareDummyHash, verifyPassword } from './passwords.ts';
import { activeLock, credentialsNow, findLoginUser, type LoginUser, recordLoginFailure, resetLoginFailures } from './queries.ts';
import { deleteUserSession } from './session-queries.ts';
import { attemptsLeft, PasswordChangeRequired, refuseWhileLocked } from './login-errors.ts';
import { type AuthChannel, createLoginFailures, type LoginInput } from './login-failures.ts';
import { OWN_SYSTEM, recordLogout } from './sign-out.ts';
import { createTwoFactor } from './two-factor.ts';

export { OWN_SYSTEM } from './sign-out.ts';
export { type AuthChannel, type FailureReason, type LoginInput, metricFailureReason } from './login-failures.ts';

/** User sign-in and sign-out, API access tokens, two-factor enrollment. */
export function createAuthService(deps: Pick<Deps, 'db' | 'config' | 'signingKeys' | 'events' | 'metrics'>) {
  const { db, config, signingKeys, events, metrics } = deps;
  const { fail, announceLock, refuseLocked } = createLoginFailures(deps);
  const twoFactor = createTwoFactor(deps, {
    async countRefusal(tx, user, ctx) {
      const login = normalizeUsername(user.username);
      const counted = await recordLoginFailure(tx, login, config.LOCKOUT_THRESHOLD, config.LOCKOUT_MINUTES);
      if (!counted.counted) return { locked: false, attemptsRemaining: null };
      if (!counted.lockedUntil) return { locked: false, attemptsRemaining: attemptsLeft(config.LOCKOUT_THRESHOLD, counted.failedCount) };
      await announceLock(tx, login, user, { ...ctx, via: 'two_factor' }, { failedCount: counted.failedCount, lockedUntil: counted.lockedUntil });
      metrics.lockouts.inc();
      return { locked: true, attemptsRemaining: 0 };
    },
  });
  prepareDummyHash(config.BCRYPT_COST);

  return {
    twoFactor,

    /**
     * Checks a login name, password and (for two-factor users) a TOTP or recovery code.
     * Throws 423 account_locked while the name is locked (nothing else is checked then); the
     * failed attempt that sets the lock is refused as itself (401, LockingFailure, saying that
     * the account is now locked); 401 invalid_credentials for any wrong
     * name/password/inactive user (one message, one bcrypt compare either way), 401
     * totp_required when the password is right but the user's code is missing (not counted),
     * 401 invalid_totp for a wrong code and 401 totp_reused for a code already used (both
     * counted). Counted 401s carry attempts_remaining.
     * On success resets the counter, audits and emits user.login, and answers the version of
     * the credentials it signed in with: the session or access token it makes carries it.
     */
    async login(input: LoginInput): Promise<{ user: UserRecord; twoFactorUsed: boolean; credentialsVersion: string }> {
      const { user, twoFactorUsed, login, code } = await checkCredentials(input, { secondFactor: true });
      // the password was right: nothing is counted, but no session or token until it is changed
      // (the code given is spent: the answer says so, and asks for the next one with the change)
      const requireChange = async (): Promise<never> => {
        const spent = await db.transaction(async (tx) => {
          if (code && !(await code.spend(tx))) return false;
          await resetLoginFailures(tx, login);
          await writeAudit(tx, {
            action: 'user.login', outcome: 'failure', userId: user.id, username: user.username, ipAddress: input.ipAddress,
            userAgent: input.userAgent, details: { via: input.via, reason: 'password_change_required', two_factor: twoFactorUsed },
          });
          return true;
        });
        if (!spent) return code!.refuse();
        throw new PasswordChangeRequired(user.id, twoFactorUsed);
      };
      if (user.must_change_password) return requireChange();

      const changed = await db.transaction(async (tx) => {
        // a lock set by a concurrent failure in the meantime still wins
        await refuseWhileLocked(tx, login);
        // a TOTP code is spent by an UPDATE of the user's row: taken for that update first, or two
        // sign-ins at once, each holding it FOR SHARE (credentialsNow), wait for each other (a deadlock)
        if (code) await lockUserRow(tx, user.id);
        // bcrypt took a quarter of a second: a password change or reset, or a deactivation,
        // committed meanwhile signed the user out everywhere, and this sign-in must not
        // outlive it with the old password (its row is locked until this commits)
        const now = await credentialsNow(tx, user.id, user.password_hash);
        // or an administrator asked for a new password meanwhile, with no new password yet
        if (now.state !== 'unchanged' || now.mustChange) return now;
        if (code && !(await code.spend(tx))) return { state: 'code_used' as const };
        await resetLoginFailures(tx, login);
        // the right credentials for a client system this user may not use: no session, no user.login
        if (input.forClient && !(await admitSignIn(tx, user, input.forClient.client_id, {
          action: 'user.login', ipAddress: input.ipAddress, userAgent: input.userAgent ?? null, details: { via: input.via, two_factor: twoFactorUsed },
        }))) {
          return { state: 'access_denied' as const };
        }
        await writeAudit(tx, {
          action: 'user.login', outcome: 'success', userId: user.id, username: user.username, ipAddress: input.ipAddress,
          userAgent: input.userAgent, details: { via: input.via, two_factor: twoFactorUsed },
        });
        await events.record(tx, 'user.login', {
          user_id: user.id, email: user.email, ip_address: input.ipAddress, user_agent: input.userAgent ?? '',
          client_system: OWN_SYSTEM, '2fa_used': twoFactorUsed,
        });
        return now;
      });
      if (changed.state === 'code_used') return code!.refuse();
      if (changed.state === 'access_denied') throw accessDenied(input.forClient!.client_name);
      if (changed.state !== 'unchanged') return fail(login, user, changed.state === 'inactive' ? 'user_inactive' : 'invalid_password', input);
      if (changed.mustChange) return requireChange();
      const { password_hash: _h, totp_secret: _s, totp_last_step: _t, must_change_password: _m, ...record } = user;
      return { user: record, twoFactorUsed, credentialsVersion: changed.version };
    },

    checkCredentials,

    /**
     * The signed-in user proves their password again before a change that a borrowed session
     * must not make (turning two-step verification on would lock the owner out). A wrong one
     * counts as a failed sign-in, toward the lock: 401 invalid_credentials, 423 account_locked.
     */
    async confirmPassword(user: Pick<UserRecord, 'username'>, password: string, ctx: { ipAddress: string; userAgent: string | null; via: AuthChannel }): Promise<void> {
      await checkCredentials({ login: user.username, password, ipAddress: ctx.ipAddress, userAgent: ctx.userAgent, via: ctx.via }, { secondFactor: false });
    },

    logoutUser,

    /**
     * A client system's logout (POST /api/sso/logout): `token` is one we issued to that
     * client for the user (used or expired is fine); 401 invalid_token otherwise. The
     * browser session the token was issued in ends too (none for a server-to-server token),
     * so that browser's next visit to /sso/login asks for the password again.
     */
    async logoutByClientToken(client: Pick<ClientRecord, 'client_id' | 'created_at'>, token: string, ctx: { ipAddress: string; userAgent: string | null }) {
      const owner = await tokenOwnerForLogout(db, deps, client, token);
      if (owner === null) throw new AppError(401, 'invalid_token', 'The token is invalid');
      return logoutUser({ userId: owner.userId, clientId: client.client_id, endSessionId: owner.sessionId ?? undefined, ...ctx, via: 'client' });
    },

    /** An access token for this service's API (POST /api/login), for a sign-in with credentials of this version. */
    issueAccessToken(user: Pick<UserRecord, 'id'>, credentialsVersion: string): { token: string; token_type: 'Bearer'; expires_in: number } {
      const ttl = config.ACCESS_TOKEN_TTL_SECONDS;
      const token = signAccessToken(user.id, signingKeys, { issuer: config.ISSUER, ttlSeconds: ttl, credentialsVersion });
      return { token, token_type: 'Bearer', expires_in: ttl };
    },

    /** The active user an access token names, with the token's claims, or null. */
    async userFromAccessToken(token: string): Promise<{ user: UserRecord; token: AccessTokenClaims } | null> {
      const claims = verifyAccessTokenClaims(token, signingKeys, config.ISSUER);
      if (claims === null) return null;
      const found = await findTokenUser(db, claims.userId, claims.jti);
      // a token from before a password change or a sign-out everywhere, or signed out itself, is
      // worthless; so is one signed after the change by a sign-in that checked the credentials
      // before it. A token names the credentials' version its sign-in saw (the time of the last
      // change, by the database's clock), which decides; only one without it (signed by an
      // earlier version) is judged by when it was signed, by this host's clock, which may be
      // behind the database's: a token signed just after a change was refused for its whole life
      if (!found?.user.active || found.revoked) return null;
      if (claims.credentialsVersion !== undefined ? claims.credentialsVersion !== found.credentialsVersion
        : found.changedAt && claims.issuedAtMs < found.changedAt.getTime()) return null;
      return { user: found.user, token: claims };
    },

    /** The user with this id if active, or null (a session of a deactivated user is worthless). */
    activeUser,
  };

  /**
   * Signs a user out: invalidates their unused SSO tokens, revokes `accessToken` (the bearer
   * token that asked), ends the session `endSessionId` (the one that asked, or for a client
   * system's logout the one its token was issued in), audits, emits user.logout
   * (`clientId`: the client system that asked). Clearing the request's cookie is the route's
   * part (endSession).
   */
  async function logoutUser(args: {
    userId: number; ipAddress: string; userAgent: string | null; via: AuthChannel; clientId?: string; accessToken?: AccessTokenClaims; endSessionId?: string;
  }): Promise<{ invalidatedTokens: number }> {
    const invalidated = await db.transaction(async (tx) => {
      const user = await findUserById(tx, args.userId);
      // the session first: a token being issued in it right now (lockLiveSession) either is
      // refused or has committed by the time its row can go, and is invalidated below
      const sessionEnded = args.endSessionId !== undefined && await deleteUserSession(tx, args.userId, args.endSessionId);
      const count = await invalidateUnusedTokens(tx, args.userId);
      if (args.accessToken) await revokeAccessToken(tx, args.accessToken);
      await writeAudit(tx, {
        action: 'user.logout', outcome: 'success', userId: args.userId, username: user?.username ?? null,
        clientId: args.clientId ?? null, ipAddress: args.ipAddress, userAgent: args.userAgent,
        details: {
          via: args.via, invalidated_tokens: count, ...(args.accessToken ? { access_token_revoked: true } : {}),
          ...(args.endSessionId !== undefined ? { session_ended: sessionEnded } : {}),
        },
      });
      await recordLogout(tx, events, { id: args.userId, email: user?.email ?? null }, args.ipAddress, args.clientId);
      return count;
    });
    return { invalidatedTokens: invalidated };
  }

  /**
   * The checks of a sign-in without its bookkeeping of success: the lock (423), the name
   * and password (401, counted), the active flag, and with `secondFactor` the TOTP or
   * recovery code of two-factor users. Failures are counted, audited and announced as for
   * a login. Used by login and by a password change, which proves the current password.
   *
   * The second factor is checked, not used up: `code` (null without one) must be spent by
   * the transaction that commits the sign-in or change, and refused when it no longer can be.
   */
  async function checkCredentials(input: LoginInput, options: { secondFactor: boolean }): Promise<{ user: LoginUser; twoFactorUsed: boolean; login: string; code: SecondFactor | null }> {
    const login = normalizeUsername(input.login);
    const lock = await activeLock(db, login);
    if (lock) return refuseLocked(login, lock.remaining_seconds, input);

    const user = await findLoginUser(db, login);
    // bcrypt reads 72 bytes: a longer password was never accepted when set, so it cannot be right
    const tooLong = Buffer.byteLength(input.password, 'utf8') > MAX_PASSWORD_BYTES;
    const passwordOk = (await verifyPassword(input.password, user?.password_hash ?? null, config.BCRYPT_COST)) && !tooLong;
    if (!user) return fail(login, null, 'unknown_user', input);
    if (!passwordOk) return fail(login, user, 'invalid_password', input);
    if (!user.active) return fail(login, user, 'user_inactive', input);

    let twoFactorUsed = false;
    let code: SecondFactor | null = null;
    if (options.secondFactor && user.totp_enabled) {
      if (input.totp === undefined || input.totp.trim() === '') {
        await writeAudit(db, {
          action: 'user.login', outcome: 'failure', userId: user.id, username: login, ipAddress: input.ipAddress,
          userAgent: input.userAgent, details: { via: input.via, reason: 'totp_required' },
        });
        throw new AppError(401, 'totp_required', 'A two-factor code is required');
      }
      const matched = await twoFactor.matchCode(db, user, input.totp);
      if (matched === 'reused' || matched === null) return fail(login, user, 'invalid_totp', input, matched === 'reused');
      twoFactorUsed = true;
      code = {
        spend: matched.spend,
        // a concurrent use took the code after it was checked: refused as that use's twin would be
        refuse: () => fail(login, user, 'invalid_totp', input, matched.kind === 'totp'),
      };
    }
    // A lock set while bcrypt ran (concurrent guesses, one of them this right password) wins:
    // the right password must not be told apart from the guesses (a must-change 403), nor
    // change the password of a locked account. Callers that write check again at commit.
    const raced = await activeLock(db, login);
    if (raced) return refuseLocked(login, raced.remaining_seconds, input);
    return { user, twoFactorUsed, login, code };
  }

  async function activeUser(userId: number): Promise<UserRecord | null> {
    const user = await findUserById(db, userId);
    return user?.active ? user : null;
  }
}

export type AuthService = ReturnType<typeof createAuthService>;

/**
 * A second factor checked with the credentials, not yet used up: `spend` uses it up in the
 * transaction that commits the sign-in or change (false: a concurrent use took it meanwhile,
 * and `refuse` answers as for a code used twice, counted toward the lock).
 */
export interface SecondFactor {
  spend(tx: Queryable): Promise<boolean>;
  refuse(): Promise<never>;
}

/** The public view of a user (docs/contract.md, "Answers"). */
export function publicUser(user: UserRecord): { id: number; username: string; email: string; role: string; full_name: string } {
  return { id: user.id, username: user.username, email: user.email, role: user.role, full_name: user.full_name };
}
