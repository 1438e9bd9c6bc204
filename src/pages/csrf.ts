import { timingSafeEqual } from 'node:crypto';
import type { Request, RequestHandler } from 'express';
import { csrfSync } from 'csrf-sync';
import { AppError } from '../http/errors.ts';

/**
 * Synchronizer-token CSRF protection for the server-rendered forms: one random token per
 * session (csrf-sync keeps it in `req.session.csrfToken`), echoed by every form as the
 * hidden field `_csrf`. SameSite=Lax cookies already stop most cross-site posts; the token
 * also covers same-site attackers and older browsers.
 */
const csrf = csrfSync({
  size: 32,
  getTokenFromRequest: (req) => {
    const value = (req.body as Record<string, unknown> | undefined)?._csrf;
    return typeof value === 'string' ? value : undefined;
  },
});

/** The session's CSRF token, created (and the session thereby saved) on first use. */
export function csrfToken(req: Request): string {
  return req.session ? csrf.generateToken(req) : '';
}

/** Whether the form's `_csrf` field equals the session's token (constant-time compare). */
export function csrfTokenMatches(req: Request): boolean {
  const received = csrf.getTokenFromRequest(req);
  const stored = req.session ? csrf.getTokenFromState(req) : undefined;
  if (typeof received !== 'string' || typeof stored !== 'string') return false;
  const a = Buffer.from(received);
  const b = Buffer.from(stored);
  return a.length === b.length && timingSafeEqual(a, b);
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
