import type { Request } from 'express';
import { SESSION_COOKIE } from '../http/session.ts';
import type { UserRecord } from '../users/queries.ts';

function promisify(run: (done: (err?: unknown) => void) => void): Promise<void> {
  return new Promise((resolve, reject) => run((err) => (err ? reject(err) : resolve())));
}

/**
 * Signs `user` in on this browser: a new session id (so an id planted before sign-in is
 * worthless: session fixation), then the user fields, then an explicit save so the row
 * exists before the answer leaves.
 */
export async function establishSession(req: Request, user: Pick<UserRecord, 'id'>, options: { twoFactorUsed: boolean }): Promise<void> {
  await promisify((done) => req.session.regenerate(done));
  req.session.userId = user.id;
  req.session.twoFactorUsed = options.twoFactorUsed;
  await promisify((done) => req.session.save(done));
}

/** Ends the session of this request (if any): the row is deleted and the cookie cleared. */
export async function endSession(req: Request): Promise<void> {
  if (req.session) await promisify((done) => req.session.destroy(done));
  req.res?.clearCookie(SESSION_COOKIE, { path: '/', httpOnly: true, sameSite: 'lax', secure: req.secure });
}
