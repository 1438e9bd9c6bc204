import type { Request } from 'express';
import type { Logger } from 'pino';
import { clientIp } from '../http/client-ip.ts';
import { SESSION_COOKIE } from '../http/session.ts';
import { failureFields } from '../http/unavailable.ts';
import { quietly } from '../logging/logger.ts';
import type { UserRecord } from '../users/user.ts';
import type { AuthChannel } from './login-failures.ts';

function promisify(run: (done: (err?: unknown) => void) => void): Promise<void> {
  return new Promise((resolve, reject) => run((err) => (err ? reject(err) : resolve())));
}

/**
 * Signs `user` in on this browser: a new session id (so an id planted before sign-in is
 * worthless: session fixation), then the user fields, then an explicit save so the row
 * exists before the answer leaves. `credentialsVersion` is the version of the credentials
 * the sign-in (or the password change) saw: when a change committed since, nothing is saved
 * and this throws 401 invalid_credentials (DbSessionStore.set).
 */
export async function establishSession(
  req: Request, user: Pick<UserRecord, 'id'>, options: { twoFactorUsed: boolean; credentialsVersion: string },
): Promise<void> {
  const renewedFrom = req.session?.userId === user.id ? req.sessionID : undefined;
  await promisify((done) => req.session.regenerate(done));
  if (renewedFrom) req.session.renewedFrom = renewedFrom; // its tokens follow (DbSessionStore.set)
  req.session.userId = user.id;
  req.session.twoFactorUsed = options.twoFactorUsed;
  // when the user proved who they are (OpenID Connect's auth_time, for max_age)
  req.session.authTime = Math.floor(Date.now() / 1000);
  req.session.credentialsVersion = options.credentialsVersion;
  req.session.ipAddress = clientIp(req);
  req.session.userAgent = (req.get('user-agent') ?? '').slice(0, 300);
  try {
    await promisify((done) => req.session.save(done));
  } catch (err) {
    // Refused: this browser gets an empty session instead (where a page's answer keeps its
    // form's CSRF token), so express-session does not save the refused one again as the
    // answer ends, a second refusal raised after the answer was written.
    await promisify((done) => req.session.regenerate(done)).catch(() => {});
    throw err;
  }
}

/**
 * establishSession after a change that has committed (a new password), which stands whatever
 * becomes of the session. The change's transaction deleted the session it renews
 * (signOutEverywhere, `renewing`). When the new one cannot be saved (the database went away
 * between the change's commit and the save, or another change committed meanwhile), the
 * browser is left signed out, its cookie cleared and no session saved or set as the answer
 * ends, and the answer is false: the caller says that the change was made and asks for a new
 * sign-in, where an error said that a change which had happened had failed.
 */
export async function renewSessionAfterChange(
  req: Request, user: Pick<UserRecord, 'id'>, options: { twoFactorUsed: boolean; credentialsVersion: string }, logger: Logger,
): Promise<boolean> {
  try {
    await establishSession(req, user, options);
    return true;
  } catch (err) {
    quietly(() => logger.warn({ ...failureFields(err), user_id: user.id }, 'password changed, but the session could not be renewed: the browser is signed out'));
    clearSessionCookie(req);
    // without a session express-session neither saves one nor sets its cookie when the answer ends
    (req as { session: unknown }).session = null;
    return false;
  }
}

/**
 * A sign-in in a browser signed in as someone else ends that user's session there as a
 * sign-out does (its unused SSO tokens invalidated, user.logout audited and sent): the
 * session is replaced, and without this the other user's tokens from it went on working and
 * nothing said their session had ended. The same user signing in again keeps theirs.
 */
export async function signOutPreviousUser(
  req: Request, auth: { logoutUser(args: { userId: number; ipAddress: string; userAgent: string | null; via: AuthChannel; endSessionId?: string }): Promise<unknown> },
  user: Pick<UserRecord, 'id'>, ctx: { ipAddress: string; userAgent: string | null; via: AuthChannel },
): Promise<void> {
  const previous = req.session?.userId;
  if (typeof previous === 'number' && previous !== user.id) await auth.logoutUser({ userId: previous, ...ctx, endSessionId: req.sessionID });
}

/** Tells the browser to drop its session cookie. */
function clearSessionCookie(req: Request): void {
  req.res?.clearCookie(SESSION_COOKIE, { path: '/', httpOnly: true, sameSite: 'lax', secure: req.secure });
}

/** Ends the session of this request (if any): the row is deleted and the cookie cleared. */
export async function endSession(req: Request): Promise<void> {
  if (req.session) await promisify((done) => req.session.destroy(done));
  clearSessionCookie(req);
}

/** A sign-in whose credentials were right but whose password must change first (see PasswordChangeRequired). */
export interface PendingPasswordChange {
  userId: number;
  twoFactorUsed: boolean;
  /** Where the sign-in continues once the password is changed (a path of this service). */
  next: string;
  /**
   * Where that path may send the browser on, for the change form's CSP `form-action`: the
   * browser applies it to every redirect after the form's post, so a sign-in for a client
   * system needs that client's callback here, as the sign-in form does.
   */
  formTargets?: string[];
  expiresAt: number;
}

declare module 'express-session' {
  interface SessionData {
    /** Set instead of userId: this browser may only change the password, then it is signed in. */
    passwordChange?: PendingPasswordChange;
  }
}

/** How long a must-change sign-in may take to choose the new password. */
const PASSWORD_CHANGE_TTL_MS = 15 * 60_000;

/**
 * Starts the restricted session of a must-change sign-in: a new session id (as a sign-in
 * does), holding only the right to change the password. Nothing else treats it as signed in.
 */
export async function beginPasswordChange(req: Request, pending: Omit<PendingPasswordChange, 'expiresAt'>): Promise<void> {
  await promisify((done) => req.session.regenerate(done));
  req.session.passwordChange = { ...pending, expiresAt: Date.now() + PASSWORD_CHANGE_TTL_MS };
  await promisify((done) => req.session.save(done));
}

/** The restricted session's pending change, unless there is none or it ran out. */
export function pendingPasswordChange(req: Request): PendingPasswordChange | null {
  const pending = req.session?.passwordChange;
  return pending && pending.expiresAt > Date.now() ? pending : null;
}
