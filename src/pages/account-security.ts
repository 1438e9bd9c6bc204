import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import { lockWarning } from '../auth/login-errors.ts';
import type { AuthService } from '../auth/service.ts';
import { MAX_PASSKEYS, type PasskeyService } from '../passkeys/service.ts';
import { clientIp } from '../http/client-ip.ts';
import { credentialOf } from '../auth/guards.ts';
import { AppError } from '../http/errors.ts';
import { input } from '../http/validate.ts';
import type { UserRecord } from '../users/user.ts';
import { fieldErrorsOf } from './field-errors.ts';
import { type FlashMessage, flashNext, renderPage } from './render.ts';
import { passkeyRemoveParams, securityCodeSchema, securityEnableSchema } from './schemas.ts';

declare module 'express-session' {
  interface SessionData {
    /**
     * Recovery codes just created, which earlier versions kept in the session for the redirect
     * to the page showing them. Nothing writes it now (the page is the POST's answer, see
     * `renderRevealed`); a session saved by an earlier version loses it at its next visit.
     */
    revealedRecoveryCodes?: unknown;
  }
}

/** Recovery codes just made, shown once in the answer to the form that made them. */
type Revealed = { codes: string[]; reason: 'enabled' | 'regenerated' };

/** The forms of the page that take a code; each marks its own field. */
type CodeForm = 'enable' | 'recovery' | 'disable';

/** What the page says for a refused code (the service's words are for the API). */
const CODE_MESSAGES: Record<string, string> = {
  invalid_totp: 'That code is not valid. Check your authenticator app (or the recovery code) and try again.',
  totp_reused: 'That code was already used. Wait for the next code to appear in your authenticator app, then enter it.',
  validation_error: 'Enter the code from your authenticator app.',
};

/** The page's words for a wrong current password, with the service's warning when one more locks the account. */
export function wrongPassword(err: AppError): string {
  return `The current password is wrong.${lockWarning(err)}`;
}

/** Refusals of the current password asked when turning two-step verification on. */
const PASSWORD_REFUSALS = new Set(['invalid_credentials', 'account_locked']);

/** Confirming the setup takes only a code from the app (recovery codes come after). */
const ENABLE_INVALID = 'That code is not valid. Enter the 6-digit code your authenticator app shows for this key.';

const SECURITY_PATH = '/account/security';

function context(req: Request) {
  return { ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null };
}

/** The QR code as an image address: a data: URL made here, so no other site is asked to draw it. */
function qrImage(svg: string): string {
  return `data:image/svg+xml;base64,${Buffer.from(svg).toString('base64')}`;
}

/**
 * The account security page (/account/security): two-step verification on (QR code and
 * secret, confirmed with a code), recovery codes shown once (download or print), new ones,
 * and off (with a code or a recovery code). Every step goes through the same two-factor
 * service as POST /api/user/2fa/*, so audit entries and user.2fa_enabled are the same.
 */
export function accountSecurityHandlers(deps: { auth: AuthService; passkeys: Pick<PasskeyService, 'list' | 'remove'> }) {
  const { twoFactor } = deps.auth;

  async function render(req: Request, res: Response, options: { status?: number; form?: CodeForm; error?: unknown; revealed?: Revealed; flash?: FlashMessage[] } = {}) {
    const user = res.locals.user as UserRecord;
    const status = await twoFactor.status(user);
    // only this session's own setup: another session's (or a token's) is never shown here
    const pending = status.totp_enabled ? null : await twoFactor.pendingSetup(user, credentialOf(req, res));
    // codes left in the session by an earlier version (see SessionData above)
    if (req.session.revealedRecoveryCodes) delete req.session.revealedRecoveryCodes;
    const err = options.error;
    const details = fieldErrorsOf(err);
    // the enable form's password was refused, or left out while the code was given
    const aboutPassword = options.form === 'enable' && err instanceof AppError
      && (PASSWORD_REFUSALS.has(err.code) || (err.code === 'validation_error' && details.current_password !== undefined && details.code === undefined));
    const message = !(err instanceof AppError) ? undefined
      : aboutPassword ? (err.code === 'invalid_credentials' ? wrongPassword(err) : err.code === 'validation_error' ? 'Enter your current password.' : err.message)
      : options.form === 'enable' && err.code === 'invalid_totp' ? `${ENABLE_INVALID}${lockWarning(err)}`
      : CODE_MESSAGES[err.code] ? `${CODE_MESSAGES[err.code]}${lockWarning(err)}` : err.message;
    const passkeys = await deps.passkeys.list(user.id);
    renderPage(req, res, 'account-security', {
      nav: 'security',
      passkeys: passkeys.map((p) => ({ id: p.id, name: p.name, created: shownTime(p.created_at), lastUsed: p.last_used_at ? shownTime(p.last_used_at) : null })),
      passkeyMax: MAX_PASSKEYS,
      totpEnabled: status.totp_enabled,
      recoveryCodesLeft: status.recovery_codes_left,
      pending: pending ? { secret: pending.secret, uri: pending.otpauth_uri, qr: qrImage(pending.qr_svg) } : null,
      revealed: options.revealed ?? null,
      shownAt: options.revealed ? `${SECURITY_PATH}#recovery-codes` : null,
    }, {
      status: options.status,
      flash: message ? [{ type: 'error', text: message }] : (options.flash ?? []),
      // the field of the form that was sent is marked, with the page's wording
      fieldErrors: !message || !options.form ? {}
        : aboutPassword ? { enable_password: message }
        : { [`${options.form}_code`]: message, ...omitFields(details) },
    });
  }

  const show: RequestHandler = (req, res) => render(req, res);

  /**
   * The page with recovery codes just made, as the answer (200) to the POST that made them.
   * Never kept in the session for a redirect: sessions are rows in the database (and in its
   * backups), and a concurrent request saving its older copy of the session would lose them
   * while the account counts ten unused. `shownAt` lets public/js/account.js put the page's
   * own address in the history, so a reload is a GET without the codes, not the form again
   * (as the admin panel does for client secrets, src/admin/panel-clients.ts).
   */
  const renderRevealed = (req: Request, res: Response, revealed: Revealed, text: string) =>
    render(req, res, { revealed, flash: [{ type: 'success', text }] });

  const setup: RequestHandler = async (req, res) => {
    await twoFactor.startSetup(res.locals.user as UserRecord, context(req), credentialOf(req, res));
    res.redirect(303, `${SECURITY_PATH}#setup`);
  };

  const enable: RequestHandler = async (req, res) => {
    const { code, current_password: password } = input(res, securityEnableSchema);
    const user = res.locals.user as UserRecord;
    await deps.auth.confirmPassword(user, password, { ...context(req), via: 'totp_enable' });
    // the other sessions end; this one stays (src/auth/two-factor.ts)
    const { recovery_codes } = await twoFactor.enable(user, code, context(req), credentialOf(req, res));
    await renderRevealed(req, res, { codes: recovery_codes, reason: 'enabled' },
      'Two-step verification is on. From now on, signing in asks for a code from your app.');
  };

  const regenerate: RequestHandler = async (req, res) => {
    const { code } = input(res, securityCodeSchema);
    const { recovery_codes } = await twoFactor.regenerateRecoveryCodes(res.locals.user as UserRecord, code, context(req));
    await renderRevealed(req, res, { codes: recovery_codes, reason: 'regenerated' },
      'New recovery codes were created. The old ones no longer work.');
  };

  const disable: RequestHandler = async (req, res) => {
    const { code } = input(res, securityCodeSchema);
    await twoFactor.disable(res.locals.user as UserRecord, code, context(req));
    flashNext(req, { type: 'success', text: 'Two-step verification is off. Signing in asks for your password only.' });
    res.redirect(303, SECURITY_PATH);
  };

  /** Removes one of the user's passkeys (audited as passkey.removed); back to the page, which no longer lists it. */
  const removePasskey: RequestHandler = async (req, res) => {
    const { passkeyId } = passkeyRemoveParams.parse(req.params);
    await deps.passkeys.remove(res.locals.user as UserRecord, passkeyId, { ...context(req), via: 'page' });
    flashNext(req, { type: 'success', text: 'The passkey was removed. It can no longer be used to sign in.' });
    res.redirect(303, `${SECURITY_PATH}#passkeys`);
  };

  /**
   * A refused form stays on the page (400 or 409) with the field marked; a stale or forged
   * form (CSRF) gets the error page and changes nothing.
   */
  const failed = (form: CodeForm | null): ErrorRequestHandler => (err, req, res, next) => {
    if (err instanceof AppError && form === 'enable' && PASSWORD_REFUSALS.has(err.code) && req.session) {
      for (const [name, value] of Object.entries(err.headers)) res.setHeader(name, value);
      render(req, res, { status: err.status, form: 'enable', error: err }).catch(next);
      return;
    }
    if (!(err instanceof AppError) || err.status >= 500 || [401, 403, 429].includes(err.status) || !req.session) return next(err);
    if (err.status === 409) {
      // already on / already off / no setup: the page as it is now explains itself
      flashNext(req, { type: 'info', text: err.message });
      res.redirect(303, SECURITY_PATH);
      return;
    }
    render(req, res, { status: err.status, form: form ?? undefined, error: err }).catch(next);
  };

  return { show, setup, enable, regenerate, disable, removePasskey, failed };
}

/** A time as the page shows it: UTC, to the minute. */
function shownTime(at: Date): string {
  return `${at.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

/** Field errors other than the code and the password, which the forms mark under their own names. */
function omitFields(errors: Record<string, string>): Record<string, string> {
  const { code: _code, current_password: _password, ...rest } = errors;
  return rest;
}
