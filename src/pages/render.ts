import type { Request, Response } from 'express';
import { csrfToken } from './csrf.ts';
import { allowFormTargets } from './security.ts';

/** A one-line message shown by views/partials/flash.ejs. */
export interface FlashMessage {
  type: 'error' | 'success' | 'info';
  text: string;
}

declare module 'express-session' {
  interface SessionData {
    /** Messages for the next page this browser sees (set before a 303, shown once). */
    flash?: FlashMessage[];
  }
}

/** Keeps a message for the next page (post/redirect/get). */
export function flashNext(req: Request, message: FlashMessage): void {
  req.session.flash = [...(req.session.flash ?? []), message];
}

/**
 * Renders a page with the locals the shared partials read: `user` (signed in), `csrfToken`,
 * and the flash messages (those kept from the previous request first). `formTargets` are
 * registered callback URLs this page's forms may end up redirecting to (see allowFormTargets).
 * Pages without forms pass `csrf: false`, so a visit stores no session for an anonymous browser.
 */
export function renderPage(
  req: Request,
  res: Response,
  view: string,
  locals: Record<string, unknown> = {},
  options: { status?: number; flash?: FlashMessage[]; formTargets?: string[]; csrf?: boolean } = {},
): void {
  const kept = req.session?.flash ?? [];
  if (req.session?.flash) delete req.session.flash;
  if (options.formTargets) allowFormTargets(res, options.formTargets);
  res.status(options.status ?? 200).render(view, {
    user: res.locals.user,
    csrfToken: options.csrf === false ? '' : csrfToken(req),
    ...locals,
    flash: [...kept, ...(options.flash ?? [])],
  });
}

