import type { Request, Response } from 'express';
import { csrfToken } from './csrf.ts';
import { type FieldErrors, fieldHelpers } from './field-errors.ts';
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
    /** Field-level problems of a form refused before a 303, shown once with the banner. */
    fieldErrors?: FieldErrors;
  }
}

/** Keeps a message for the next page (post/redirect/get). */
export function flashNext(req: Request, message: FlashMessage): void {
  req.session.flash = [...(req.session.flash ?? []), message];
}

/** Keeps field-level problems for the next page (post/redirect/get), next to the banner. */
export function fieldErrorsNext(req: Request, errors: FieldErrors): void {
  if (Object.keys(errors).length > 0) req.session.fieldErrors = { ...(req.session.fieldErrors ?? {}), ...errors };
}

/**
 * Renders a page with the locals the shared partials read: `user` (signed in), `csrfToken`,
 * the flash messages (those kept from the previous request first), and the field-level
 * problems with their helpers `invalid` and `fieldError` (see field-errors.ts). `formTargets` are
 * registered callback URLs this page's forms may end up redirecting to (see allowFormTargets).
 * Pages without forms pass `csrf: false`, so a visit stores no session for an anonymous browser.
 */
export function renderPage(
  req: Request,
  res: Response,
  view: string,
  locals: Record<string, unknown> = {},
  options: { status?: number; flash?: FlashMessage[]; formTargets?: string[]; csrf?: boolean; fieldErrors?: FieldErrors } = {},
): void {
  const kept = req.session?.flash ?? [];
  if (req.session?.flash) delete req.session.flash;
  const keptFields = req.session?.fieldErrors ?? {};
  if (req.session?.fieldErrors) delete req.session.fieldErrors;
  if (options.formTargets) allowFormTargets(res, options.formTargets);
  res.status(options.status ?? 200).render(view, {
    user: res.locals.user,
    csrfToken: options.csrf === false ? '' : csrfToken(req, res),
    ...fieldHelpers({ ...keptFields, ...(options.fieldErrors ?? {}) }),
    ...locals,
    flash: [...kept, ...(options.flash ?? [])],
  });
}


/**
 * The page for a password change that was made but could not keep the browser signed in
 * (renewSessionAfterChange): what happened, and a link to sign in again with the new password.
 */
export function renderChangedSignedOut(req: Request, res: Response, page: { heading: string; signIn: string }): void {
  renderPage(req, res, 'signed-out', {
    heading: page.heading,
    lead: 'You could not be kept signed in just now. Sign in again with your new password.',
    signIn: page.signIn,
  }, { csrf: false });
}
