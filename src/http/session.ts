import path from 'node:path';
import type { RequestHandler } from 'express';
import session, { Store, type SessionData } from 'express-session';
import type { Config } from '../config.ts';
import { developmentKey } from '../config/key-file.ts';
import { deleteSession, readSession, saveSession, saveSignedInSession, touchSessionLastSeen, updateSession } from './session-store-queries.ts';
import type { Db } from '../db/db.ts';
import { AppError } from './errors.ts';

declare module 'express-session' {
  interface SessionData {
    /** The signed-in user (users.id). Set only by establishSession. */
    userId: number;
    /** Whether the sign-in that established this session passed a second factor. */
    twoFactorUsed: boolean;
    /** When the sign-in that established this session happened (seconds since the epoch). */
    authTime?: number;
    /** The version of the user's credentials its sign-in saw (CREDENTIALS_VERSION). */
    credentialsVersion?: string;
    /** Where the sign-in came from, for the user's list of sessions. */
    ipAddress?: string;
    userAgent?: string;
    /**
     * The id this browser's session had before a sign-in of the same user renewed it (a
     * password change, a second sign-in): the SSO tokens issued under that id are moved to the
     * new one as it is saved, so a client's logout with one of them still ends this session.
     * Never stored.
     */
    renewedFrom?: string;
    /**
     * A dashboard one-click sign-in handed to a client's initiate-login URL: the sign-in that
     * client starts next (GET /sso/login, before `until`, ms) is the dashboard's, so its
     * token carries the user's active link name there (src/pages/dashboard.ts, login.ts).
     */
    dashboardSignIn?: { clientId: string; until: number };
  }
}

/** The session cookie's name. */
export const SESSION_COOKIE = 'auth.sid';

/**
 * Marks a session that was read from the table (not enumerable, so never stored): its
 * writes only update the row, never create it again.
 */
const READ_FROM_STORE = Symbol('read from the session store');

/** How long a session nobody has signed in to is kept after its last write (seconds). */
export const ANONYMOUS_SESSION_SECONDS = 3600;

/** How stale a session's last_seen_at may get before a read moves it (seconds). */
const LAST_SEEN_STEP_SECONDS = 60;

/**
 * express-session store on the `sessions` table, through the Db interface, so it works on
 * PostgreSQL and on the embedded database and every instance sees every session.
 * No `touch`: sessions do not roll (the cookie keeps the expiry it got at sign-in), so the
 * row's expiry never needs moving, and a signed-in request costs one read, no write.
 * Expired rows are deleted by the pruner (retention/pruner.ts), in batches, every PRUNE_INTERVAL.
 */
export class DbSessionStore extends Store {
  constructor(
    private readonly db: Db,
    private readonly ttlSeconds: number,
  ) {
    super();
  }

  private expiry(sess: SessionData): Date {
    const expires = sess.cookie?.expires;
    const full = expires ? new Date(expires) : new Date(Date.now() + this.ttlSeconds * 1000);
    if (sess.userId !== undefined) return full;
    // Nobody is signed in to it (a form's CSRF token, a flash, a sign-in half done): anyone
    // can make such rows by fetching a page, so they last an hour from their last write, not
    // SESSION_TTL_SECONDS. Signing in gives a new session (establishSession) its full life.
    return new Date(Math.min(full.getTime(), Date.now() + ANONYMOUS_SESSION_SECONDS * 1000));
  }

  override get(sid: string, callback: (err: unknown, session?: SessionData | null) => void): void {
    readSession(this.db, sid, LAST_SEEN_STEP_SECONDS)
      .then((row) => {
        // "last seen" on the user's sessions page: moved at most once a step, not on every request
        if (row?.stale) touchSessionLastSeen(this.db, sid).catch(() => {});
        const raw = row?.sess as SessionData | string | undefined;
        callback(null, raw === undefined ? null : typeof raw === 'string' ? JSON.parse(raw) : raw);
      }, callback);
  }

  override createSession(req: Parameters<Store['createSession']>[0], sess: SessionData) {
    const created = super.createSession(req, sess);
    Object.defineProperty(created, READ_FROM_STORE, { value: true, enumerable: false });
    return created;
  }

  /**
   * A new session (a sign-in's, after its id was regenerated) is inserted; a signed-in one
   * only while the user's credentials are of the version its sign-in saw, else the save
   * fails with 401 invalid_credentials. One that was read from the table, or written once
   * already, is only updated: a request still running on a session that a sign-out
   * everywhere (password change or reset, deactivation) deleted meanwhile would otherwise
   * write the row back, signed in, when it ends: a stolen cookie kept busy would survive.
   */
  override set(sid: string, sess: SessionData, callback?: (err?: unknown) => void): void {
    const { renewedFrom, ...kept } = sess;
    const json = JSON.stringify(kept);
    const stored = sess as { [READ_FROM_STORE]?: boolean };
    let write: Promise<boolean>;
    if (stored[READ_FROM_STORE]) write = updateSession(this.db, sid, json, this.expiry(sess)).then(() => true);
    else if (typeof sess.userId === 'number' && typeof sess.credentialsVersion === 'string') {
      write = saveSignedInSession(this.db, sid, json, this.expiry(sess), { userId: sess.userId, credentialsVersion: sess.credentialsVersion, renewedFrom });
    } else write = saveSession(this.db, sid, json, this.expiry(sess)).then(() => true);
    write.then((saved) => {
      if (!saved) return callback?.(new AppError(401, 'invalid_credentials', 'Your password changed, or you were signed out everywhere, while you were signing in. Sign in again.'));
      if (!stored[READ_FROM_STORE]) Object.defineProperty(sess, READ_FROM_STORE, { value: true, enumerable: false });
      callback?.();
    }, (err) => callback?.(err));
  }

  override destroy(sid: string, callback?: (err?: unknown) => void): void {
    deleteSession(this.db, sid).then(() => callback?.(), (err) => callback?.(err));
  }
}

/**
 * The key that signs new session cookies: SESSION_SECRET when set (required in production);
 * otherwise one generated once and kept in DATA_DIR, so sessions survive a restart of a
 * development instance. Synchronous: it runs once while the app is built.
 */
export function loadSessionSecret(config: Pick<Config, 'SESSION_SECRET' | 'DATA_DIR'>): string {
  return config.SESSION_SECRET || developmentKey(path.resolve(config.DATA_DIR, 'session.key'));
}

/**
 * The keys of the session cookie, the signing one first: express-session signs new cookies
 * with the first and accepts a cookie signed with any, so during a rotation the sessions
 * begun under SESSION_PREVIOUS_SECRETS keep working until they end.
 */
export function sessionSecrets(config: Pick<Config, 'SESSION_SECRET' | 'SESSION_PREVIOUS_SECRETS' | 'DATA_DIR'>): string[] {
  const current = loadSessionSecret(config);
  return [current, ...(config.SESSION_PREVIOUS_SECRETS ?? []).filter((s) => s !== current)];
}

/**
 * The session middleware: sessions in the database, cookie `auth.sid` HttpOnly, SameSite=Lax,
 * Secure in production, lifetime SESSION_TTL_SECONDS. Nothing is stored (and no cookie set)
 * until a sign-in puts something in the session.
 */
export function sessionMiddleware(
  config: Pick<Config, 'SESSION_SECRET' | 'SESSION_PREVIOUS_SECRETS' | 'DATA_DIR' | 'SESSION_TTL_SECONDS' | 'NODE_ENV'>,
  db: Db,
): RequestHandler {
  return session({
    name: SESSION_COOKIE,
    secret: sessionSecrets(config),
    store: new DbSessionStore(db, config.SESSION_TTL_SECONDS),
    resave: false,
    saveUninitialized: false,
    unset: 'destroy',
    cookie: {
      httpOnly: true,
      sameSite: 'lax',
      secure: config.NODE_ENV === 'production',
      maxAge: config.SESSION_TTL_SECONDS * 1000,
      path: '/',
    },
  });
}

/**
 * express-session writes a changed session while the answer is already on its way: a 303's
 * headers leave before the save, and a browser follows the redirect at once, so the next
 * page could read the session without what this request put there (a flash message, a
 * one-time secret). This makes `res.redirect` wait for the save of a session that changed
 * during the request; unchanged and uninitialized sessions are not written.
 */
export const saveSessionBeforeRedirect: RequestHandler = (req, res, next) => {
  const before = req.session ? JSON.stringify(req.session) : undefined;
  const redirect = res.redirect.bind(res) as (...args: unknown[]) => void;
  res.redirect = ((...args: unknown[]) => {
    const session = req.session;
    if (!session || JSON.stringify(session) === before) return redirect(...args);
    session.save((err) => (err ? next(err) : redirect(...args)));
  }) as typeof res.redirect;
  next();
};
