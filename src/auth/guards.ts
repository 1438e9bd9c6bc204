import type { Request, RequestHandler, Response } from 'express';
import type { AuthService } from './service.ts';
import type { UserRecord } from '../users/user.ts';
import { AppError } from '../http/errors.ts';

/** How the current user proved who they are. */
export type AuthMethod = 'session' | 'bearer';

/**
 * Finds the signed-in user, if any, and puts them in `res.locals.user` (an active
 * UserRecord) with `res.locals.authMethod`: from `Authorization: Bearer <access token from
 * POST /api/login>` when that header is sent (then only the token counts), otherwise from
 * the session. Never answers by itself: `requireUser`/`requireAdmin` decide. Mounted once
 * globally; running it again in a route chain costs nothing.
 */
export function authenticateUser(services: { auth: Pick<AuthService, 'activeUser' | 'userFromAccessToken'> }): RequestHandler {
  return async (req, res, next) => {
    if (res.locals.userAuthenticated) return next();
    res.locals.userAuthenticated = true;
    const header = req.get('authorization');
    if (header !== undefined && /^bearer\s/i.test(header)) {
      const token = header.slice(7).trim();
      const found = token.length > 0 && token.length <= 4096 ? await services.auth.userFromAccessToken(token) : null;
      if (found) {
        res.locals.user = found.user;
        res.locals.authMethod = 'bearer' satisfies AuthMethod;
        res.locals.accessToken = found.token; // a logout revokes it
      }
      return next();
    }
    const userId = req.session?.userId;
    if (typeof userId === 'number') {
      const user = await services.auth.activeUser(userId);
      if (user) {
        res.locals.user = user;
        res.locals.authMethod = 'session' satisfies AuthMethod;
      }
    }
    next();
  };
}

/**
 * What the signed-in caller proved themselves with: the browser session, or the access token
 * (its id). A two-factor setup belongs to it (src/auth/two-factor.ts).
 */
export function credentialOf(req: Request, res: Response): { kind: 'session'; sid: string } | { kind: 'token'; jti: string } {
  const token = res.locals.accessToken as { jti: string } | undefined;
  return res.locals.authMethod === 'bearer' && token ? { kind: 'token', jti: token.jti } : { kind: 'session', sid: req.sessionID };
}

/** The user `authenticateUser` found; only call after `requireUser` or `requireAdmin`. */
export function currentUser(res: Response): UserRecord {
  return res.locals.user as UserRecord;
}

/** 401 `{error:"unauthenticated"}` unless someone is signed in. */
export const requireUser: RequestHandler = (_req, res, next) => {
  if (!res.locals.user) throw new AppError(401, 'unauthenticated', 'Sign in first');
  next();
};

/** 401 as requireUser when nobody is signed in; 403 `{error:"forbidden"}` unless the user's role is admin. */
export const requireAdmin: RequestHandler = (_req, res, next) => {
  const user = res.locals.user as UserRecord | undefined;
  if (!user) throw new AppError(401, 'unauthenticated', 'Sign in first');
  if (user.role !== 'admin') throw new AppError(403, 'forbidden', 'Administrators only');
  next();
};
