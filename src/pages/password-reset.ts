import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import type { PasswordService } from '../auth/password-service.ts';
import { clientIp } from '../http/client-ip.ts';
import { AppError } from '../http/errors.ts';
import { input, queryInput } from '../http/validate.ts';
import { forgotFormSchema, resetFormSchema, resetQuerySchema } from './account-schemas.ts';
import { renderPage } from './render.ts';

function context(req: Request) {
  return { ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null, via: 'page' as const };
}

/**
 * The pages of a forgotten password: ask for a link (/forgot-password), and set a new
 * password with it (/reset-password?token=). Without any way to send mail (production
 * without SMTP_URL) the first page says an administrator must reset the password.
 */
export function passwordResetHandlers(deps: { passwords: PasswordService }) {
  const { passwords } = deps;

  const renderForgot = (req: Request, res: Response, options: { status?: number; sent?: boolean; error?: string } = {}) => {
    renderPage(req, res, 'forgot-password', { available: passwords.mailAvailable, sent: options.sent === true }, {
      status: options.status ?? (passwords.mailAvailable ? 200 : 503),
      flash: options.error ? [{ type: 'error', text: options.error }] : [],
      csrf: passwords.mailAvailable,
    });
  };

  const showForgot: RequestHandler = (req, res) => renderForgot(req, res);

  /** The same page ("if an account matches, a link is on its way") whatever the name. */
  const submitForgot: RequestHandler = (req, res) => {
    const { login } = input(res, forgotFormSchema);
    passwords.requestReset(login, context(req));
    renderForgot(req, res, { status: 202, sent: true });
  };

  const forgotFailed: ErrorRequestHandler = (err, req, res, next) => {
    if (!(err instanceof AppError) || err.code === 'invalid_csrf_token') return next(err);
    if (err.code === 'email_not_configured') return renderForgot(req, res);
    if (err.code === 'rate_limited') {
      for (const [name, value] of Object.entries(err.headers)) res.setHeader(name, value);
      return renderForgot(req, res, { status: 429, error: 'Too many requests from your network. Please wait a minute and try again.' });
    }
    if (err.code === 'validation_error') return renderForgot(req, res, { status: 400, error: 'Enter your username or email address.' });
    next(err);
  };

  const renderReset = (req: Request, res: Response, token: string, options: { status?: number; valid?: boolean; done?: boolean; error?: string } = {}) => {
    renderPage(req, res, 'reset-password', { token, valid: options.valid !== false, done: options.done === true }, {
      status: options.status,
      flash: options.error ? [{ type: 'error', text: options.error }] : [],
    });
  };

  /** The form when the link still works; otherwise why not, and a way to a new one. */
  const showReset: RequestHandler = async (req, res) => {
    const token = queryInput(res, resetQuerySchema).token ?? '';
    const valid = await passwords.resetTokenValid(token);
    renderReset(req, res, valid ? token : '', { valid, status: valid ? 200 : 400 });
  };

  const submitReset: RequestHandler = async (req, res) => {
    const form = input(res, resetFormSchema);
    if (form.new_password !== form.confirm_password) {
      return renderReset(req, res, form.token, { status: 400, error: 'The two new passwords differ. Type the same new password twice.' });
    }
    await passwords.reset(form.token, form.new_password, context(req));
    renderReset(req, res, '', { done: true });
  };

  const resetFailed: ErrorRequestHandler = (err, req, res, next) => {
    if (!(err instanceof AppError) || err.status >= 500 || err.code === 'invalid_csrf_token') return next(err);
    const token = typeof req.body?.token === 'string' ? String(req.body.token).slice(0, 200) : '';
    for (const [name, value] of Object.entries(err.headers)) res.setHeader(name, value);
    if (err.code === 'invalid_reset_token') return renderReset(req, res, '', { status: 400, valid: false });
    const details = err.extra.details as Array<{ message: string }> | undefined;
    const text = err.code === 'validation_error' && details?.[0] ? details[0].message
      : err.code === 'rate_limited' ? 'Too many requests from your network. Please wait a minute and try again.' : err.message;
    renderReset(req, res, token, { status: err.status, error: text });
  };

  return { showForgot, submitForgot, forgotFailed, showReset, submitReset, resetFailed };
}
