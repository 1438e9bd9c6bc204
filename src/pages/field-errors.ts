import { AppError } from '../http/errors.ts';

/** Problems of a form by field name (the input's `name`, or a key the view chooses). */
export type FieldErrors = Record<string, string>;

/** Refusals of the services that concern one form field, by error code. */
const FIELD_OF_CODE: Record<string, string> = {
  invalid_callback_url: 'callback_url',
  invalid_allowed_ips: 'allowed_ips',
  allow_everything_unconfirmed: 'allowed_ips',
  invalid_logo_url: 'logo_url',
  invalid_initiate_login_uri: 'initiate_login_uri',
  invalid_client_id: 'client_id',
  client_exists: 'client_name',
  invalid_username: 'username',
  username_taken: 'username',
  invalid_email: 'email',
  invalid_password: 'password',
  invalid_role: 'role',
  cannot_demote_self: 'role',
  last_admin: 'role',
  invalid_url: 'url',
  url_not_allowed: 'url',
  invalid_totp: 'code',
  totp_reused: 'code',
};

const sentence = (text: string) => {
  const t = text.trim();
  return t === '' ? t : t[0].toUpperCase() + t.slice(1) + (/[.!?]$/.test(t) ? '' : '.');
};

/**
 * The field-level problems of a refused form: each validation detail under its field, a
 * service refusal (bad callback URL, taken username...) under the field it concerns.
 * `rename` maps a field name of the error to the form's (e.g. the API's `events`).
 */
export function fieldErrorsOf(err: unknown, rename: Record<string, string> = {}): FieldErrors {
  if (!(err instanceof AppError)) return {};
  const out: FieldErrors = {};
  const details = err.extra.details as Array<{ path: string; message: string }> | undefined;
  if (err.code === 'validation_error' && details) {
    for (const d of details) {
      const field = String(d.path ?? '').split('.')[0];
      if (field && !(rename[field] ?? field).startsWith('_') && out[rename[field] ?? field] === undefined) out[rename[field] ?? field] = sentence(d.message);
    }
    return out;
  }
  const field = err.extra.field as string | undefined ?? FIELD_OF_CODE[err.code];
  // under its field, "callback_url must be ..." reads better as "Must be ..."
  if (field) out[rename[field] ?? field] = sentence(err.message.replace(new RegExp(`^${field}:?\\s+`), ''));
  return out;
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * What a view needs to mark fields: `invalid(name, errorId, hintId?)` gives the input's
 * aria-invalid / aria-describedby attributes, `fieldError(name, errorId)` the message under
 * it (both empty when the field is fine; hint ids stay described either way).
 */
export function fieldHelpers(errors: FieldErrors) {
  return {
    fieldErrors: errors,
    invalid(name: string, errorId: string, hintId?: string): string {
      const ids = [errors[name] !== undefined ? errorId : '', hintId ?? ''].filter(Boolean).join(' ');
      return `${errors[name] !== undefined ? ' aria-invalid="true"' : ''}${ids ? ` aria-describedby="${escapeHtml(ids)}"` : ''}`;
    },
    fieldError(name: string, errorId: string): string {
      const message = errors[name];
      return message === undefined ? '' : `<p class="field__error" id="${escapeHtml(errorId)}">${escapeHtml(message)}</p>`;
    },
  };
}
