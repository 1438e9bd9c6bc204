import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Express, Request, RequestHandler, Response } from 'express';
import { csrfSync } from 'csrf-sync';
import { AppError } from '../http/errors.ts';

/**
 * CSRF protection for the server-rendered forms, every form echoing its token as the hidden
 * field `_csrf`. SameSite=Lax cookies already stop most cross-site posts; the token also covers
 * same-site attackers and older browsers.
 *
 * A browser with a session (signed in, a sign-in half done, a flash message) has a synchronizer
 * token: one random token per session (csrf-sync keeps it in `req.session.csrfToken`). A browser
 * without one gets none: a page it fetches stores nothing (each anonymous GET of a sign-in page
 * used to write a session row for an hour, so a loop of GETs filled the table). Its forms carry a
 * signed double-submit token instead: a random nonce in the cookie `auth.csrf` (HttpOnly,
 * SameSite=Lax), and in the form the nonce's HMAC under the session secret, which only this
 * service can make. A post is accepted with either token, so a form rendered before the
 * browser had a session still works once it has one.
 */
const csrf = csrfSync({
  size: 32,
  getTokenFromRequest: (req) => {
    const value = (req.body as Record<string, unknown> | undefined)?._csrf;
    return typeof value === 'string' ? value : undefined;
  },
});

/** The double-submit cookie of a browser without a session. */
export const CSRF_COOKIE = 'auth.csrf';

/** What an app signs its double-submit tokens with: the session secrets (the first signs, all verify), and the cookie's Secure flag. */
interface DoubleSubmit {
  keys: string[];
  secure: boolean;
}
const DOUBLE_SUBMIT = new WeakMap<object, DoubleSubmit>();

/** Gives `app` the keys of its double-submit tokens (src/app.ts: the session secrets, current first). */
export function useCsrfKeys(app: Express, keys: string[], options: { secure: boolean }): void {
  // a key of its own, derived from each secret: the tokens sign a nonce the browser sends, and
  // must never be signatures the session cookie's own key would accept
  DOUBLE_SUBMIT.set(app, { keys: keys.map((k) => createHmac('sha256', k).update('auth-service csrf double-submit key').digest('base64url')), secure: options.secure });
}

const sign = (key: string, nonce: string) => createHmac('sha256', key).update(`csrf:${nonce}`).digest('base64url');

/** The nonce of the request's `auth.csrf` cookie, when it has a well-formed one. Hand-parsed: one cookie of a fixed, URL-safe form. */
function nonceOf(req: Request): string | undefined {
  const header = req.headers.cookie ?? '';
  const match = /(?:^|;\s*)auth\.csrf=([A-Za-z0-9_-]{43})(?:;|$)/.exec(header);
  return match?.[1];
}

/** Whether the request's session holds anything (so it is stored, or will be as this answer ends). */
function hasSessionState(req: Request): boolean {
  return req.session !== undefined && Object.keys(req.session).some((k) => k !== 'cookie');
}

/**
 * The token for the forms of this page: the session's, when the browser has a session (created
 * in it on first use); otherwise the signed double-submit token, setting the `auth.csrf` cookie
 * when the browser has none, and storing nothing.
 */
export function csrfToken(req: Request, res: Response): string {
  if (!req.session) return '';
  const signing = DOUBLE_SUBMIT.get(req.app);
  if (hasSessionState(req) || !signing) return csrf.generateToken(req);
  let nonce = nonceOf(req);
  if (!nonce) {
    nonce = randomBytes(32).toString('base64url');
    res.cookie(CSRF_COOKIE, nonce, { httpOnly: true, sameSite: 'lax', secure: signing.secure, path: '/' });
  }
  return sign(signing.keys[0]!, nonce);
}

const sameText = (a: string, b: string) => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};

/** Whether the form's `_csrf` field equals the session's token or the signed token of the `auth.csrf` cookie (constant-time compares). */
export function csrfTokenMatches(req: Request): boolean {
  const received = csrf.getTokenFromRequest(req);
  if (typeof received !== 'string') return false;
  const stored = req.session ? csrf.getTokenFromState(req) : undefined;
  if (typeof stored === 'string' && sameText(received, stored)) return true;
  const nonce = nonceOf(req);
  const signing = DOUBLE_SUBMIT.get(req.app);
  return nonce !== undefined && signing !== undefined && signing.keys.some((key) => sameText(received, sign(key, nonce)));
}

/**
 * Refuses a state-changing form whose `_csrf` field is missing or wrong: 403
 * invalid_csrf_token. Runs after the form body has been parsed.
 */
export const requireCsrf: RequestHandler = (req, _res, next) => {
  if (!csrfTokenMatches(req)) {
    throw new AppError(403, 'invalid_csrf_token', 'This form has expired or did not come from this site. Please try again.');
  }
  next();
};
