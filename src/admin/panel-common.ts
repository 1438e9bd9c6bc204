import { type ErrorRequestHandler, type Request, type RequestHandler, type Response } from 'express';
import { AppError } from '../http/errors.ts';
import { formBody } from '../http/text-guard.ts';
import { type FieldErrors, fieldErrorsOf } from '../pages/field-errors.ts';
import { signInRedirect } from '../pages/login-target.ts';
import { fieldErrorsNext, type FlashMessage, flashNext, renderPage } from '../pages/render.ts';
import type { UserRecord } from '../users/user.ts';

declare module 'express-session' {
  interface SessionData {
    /**
     * A client secret just created or regenerated, which earlier versions kept in the session
     * for the redirect to the page showing it. Nothing writes it now (the page is the POST's
     * answer, see panel-clients.ts); a session saved by an earlier version loses it at its next
     * admin page rather than keeping it until it expires.
     */
    revealedSecret?: unknown;
  }
}

/**
 * Admin forms post urlencoded bodies; the webhook form has one checkbox per event. The client
 * form carries a logo of up to 15,000 characters and an allow list of up to 8,000, sent again
 * with every save: urlencoded, base64's + / = and IPv6's colons take three bytes each, so a
 * client the API accepted outgrew 16 KiB and its form answered 413 (a review helper).
 */
export const adminFormBody = formBody({ parameterLimit: 50, limit: '96kb' });

/**
 * The panel is for administrators in a browser session. Nobody signed in: to the sign-in
 * page, which comes back here. Signed in without role admin: 403, as an error page.
 */
export const requireAdminPage: RequestHandler = (req, res, next) => {
  const user = res.locals.user as UserRecord | undefined;
  if (!user || res.locals.authMethod !== 'session') {
    res.redirect(303, signInRedirect(req, res, req.originalUrl));
    return;
  }
  if (user.role !== 'admin') throw new AppError(403, 'forbidden', 'This page is for administrators only.');
  next();
};

/** Times in the panel: UTC, to the second. */
export function formatTime(value: Date | string | null | undefined): string {
  if (value === null || value === undefined) return '';
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? '' : `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** Renders views/admin/<view> with the admin chrome's locals. */
export function renderAdmin(
  req: Request,
  res: Response,
  view: string,
  locals: Record<string, unknown>,
  options: { status?: number; flash?: FlashMessage[]; fieldErrors?: FieldErrors } = {},
): void {
  // a one-time secret left in the session by an earlier version (see SessionData above)
  if (req.session?.revealedSecret) delete req.session.revealedSecret;
  renderPage(req, res, `admin/${view}`, { nav: 'admin', fmt: formatTime, ...locals }, options);
}

/** The message of a refused request, for the page (the first detail of a validation error). */
export function messageOf(err: AppError): string {
  const details = err.extra.details as Array<{ path: string; message: string }> | undefined;
  if (err.code === 'validation_error' && details?.[0]) {
    return details[0].path ? `${details[0].path.replace(/_/g, ' ')}: ${details[0].message}` : details[0].message;
  }
  return err.message;
}

/** The options of a form shown again after a refusal: 400, the banner as summary, the fields marked. */
export function refusedForm(err: unknown, rename: Record<string, string> = {}): { status: number; flash: FlashMessage[]; fieldErrors: FieldErrors } {
  const text = err instanceof AppError ? messageOf(err) : 'The form could not be saved.';
  return { status: 400, flash: [{ type: 'error', text }], fieldErrors: fieldErrorsOf(err, rename) };
}

/**
 * A refused panel form goes back (post/redirect/get) with the reason shown. A stale or forged
 * form (CSRF), a refusal of access and server errors get the error page and change nothing.
 * So does a form whose page is itself missing (a malformed id, or `missing`: the 404 code of
 * the page's subject, e.g. user_not_found for /admin/users/:id): going back there would answer
 * an error page, which shows no message, and the message would wait in the session for some
 * later, unrelated page.
 */
export function backWithError(back: (req: Request) => string, missing: string): ErrorRequestHandler {
  return (err, req, res, next) => {
    if (!(err instanceof AppError) || err.status >= 500 || [401, 403, 429].includes(err.status) || !req.session) return next(err);
    if (err.code === 'invalid_id' || err.code === missing) return next(err);
    flashNext(req, { type: 'error', text: messageOf(err) });
    fieldErrorsNext(req, fieldErrorsOf(err));
    res.redirect(303, back(req));
  };
}

/** An HTML checkbox: present ("on") or absent. */
export function checked(value: unknown): boolean {
  return value === 'on' || value === 'true' || value === '1';
}

/** A textarea of addresses: one per line, or separated by commas or spaces. */
export function splitList(value: unknown): string[] {
  return typeof value === 'string' ? value.split(/[\s,]+/).map((s) => s.trim()).filter(Boolean) : [];
}

/**
 * What the page of a refused edit shows, to be saved again: a field the administrator changed
 * keeps what they typed and the value their page had shown (`was_`), so saving again is still
 * judged against that (a field someone else changed meanwhile is still theirs, not the
 * administrator's edit); the field that was in conflict shows as saved now, so saving again
 * replaces it; every other field shows what is saved now.
 */
export function refusedEdit<K extends string>(
  fields: readonly K[], posted: Record<string, unknown>, now: Record<K, string>, refused: unknown,
  same: (field: K, a: string, b: string) => boolean = (_f, a, b) => a.trim() === b.trim(),
): { form: Record<K, string>; shown: Record<K, string> } {
  const form = {} as Record<K, string>;
  const shown = {} as Record<K, string>;
  const conflict = refused instanceof AppError && refused.code === 'edit_conflict' ? refused.extra.field : undefined;
  for (const field of fields) {
    const typed = typeof posted[field] === 'string' ? posted[field] : now[field];
    const was = typeof posted[`was_${field}`] === 'string' ? posted[`was_${field}`] as string : undefined;
    const edited = was === undefined ? !same(field, typed, now[field]) : !same(field, typed, was);
    form[field] = edited ? typed : now[field];
    shown[field] = !edited || conflict === field || was === undefined ? now[field] : was;
  }
  return { form, shown };
}

/**
 * The fields of an edit form the administrator changed, to be saved and no others. Each edit
 * form carries the values its page showed (`was_<field>`); a field sent as shown is left out,
 * so a change someone else made to it since stands: a form saved from an older page gave a
 * demoted administrator the role back and re-admitted a range removed from an allow list (a
 * review helper, 2026-11-27). A field changed here that someone else also changed since is
 * refused by the service that saves it, under the row's lock (refuseEditConflicts, 409
 * edit_conflict). A form without `was_` values (a script) has every field saved, as before.
 */
export function editedFields<K extends string>(
  fields: readonly K[], typed: Record<K, string>, shown: Partial<Record<`was_${K}`, string>>,
  same: (field: K, a: string, b: string) => boolean = (_f, a, b) => a.trim() === b.trim(),
): K[] {
  return fields.filter((field) => {
    const was = shown[`was_${field}` as `was_${K}`];
    return was === undefined || !same(field, typed[field], was);
  });
}
