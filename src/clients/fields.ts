import { AppError } from '../http/errors.ts';
import { logoUrlProblem } from '../validation/logo-url.ts';
import { isAllowEverything, normalizeAllowList } from './allowlist.ts';
import type { OidcFields } from './queries.ts';

/*
 * The checks of a client's fields as an administrator gives them (API, panel, command line,
 * seed files): each answers the value to store or throws the 400 that names what is wrong.
 */

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * A callback must be an absolute http(s) URL without credentials or a fragment. In
 * production it must be https (the token travels in its query string), except on loopback.
 */
export function checkCallbackUrl(raw: string, options: { production?: boolean } = {}): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new AppError(400, 'invalid_callback_url', 'callback_url must be an absolute http(s) URL');
  }
  if (!['http:', 'https:'].includes(url.protocol) || url.username || url.password || url.hash) {
    throw new AppError(400, 'invalid_callback_url', 'callback_url must be an absolute http(s) URL without credentials or fragment');
  }
  if (options.production && url.protocol === 'http:' && !LOOPBACK_HOSTS.has(url.hostname)) {
    throw new AppError(400, 'invalid_callback_url', 'callback_url must use https: the token travels in its query string');
  }
  return url.toString();
}

/**
 * A client's initiate-login URL as given (blank or null: none): as a callback, an absolute
 * http(s) URL without credentials or fragment (https in production, except on loopback), or
 * 400 invalid_initiate_login_uri. The database checks the same (migrations/0023).
 */
export function checkInitiateLoginUri(raw: string | null | undefined, options: { production?: boolean } = {}): string | null {
  const value = raw?.trim() ?? '';
  if (value === '') return null;
  try {
    return checkCallbackUrl(value, options);
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    throw new AppError(400, 'invalid_initiate_login_uri', err.message.replace(/^callback_url/, 'initiate_login_uri').replace('the token travels in its query string', 'the browser of a signed-in user is sent there'));
  }
}

/**
 * The OpenID Connect fields as given, each URL checked as a callback URL is (absolute http(s),
 * no fragment, https in production but on loopback); a public client has no allow list.
 */
export function checkOidcFields(input: OidcFields, options: { production: boolean; allowedIps?: string[] }): OidcFields {
  const urls = (list: string[] | undefined, field: string) => {
    if (list === undefined) return undefined;
    if (list.length > 20) throw new AppError(400, 'invalid_redirect_uri', `${field}: at most 20 URLs`);
    return [...new Set(list.map((u) => {
      try {
        return checkCallbackUrl(u, options);
      } catch (err) {
        if (err instanceof AppError) throw new AppError(400, 'invalid_redirect_uri', `${field}: ${err.message.replace(/^callback_url/, JSON.stringify(u))}`);
        throw err;
      }
    }))];
  };
  const out: OidcFields = {
    redirectUris: urls(input.redirectUris, 'redirect_uris'),
    postLogoutRedirectUris: urls(input.postLogoutRedirectUris, 'post_logout_redirect_uris'),
    public: input.public,
    backchannelLogoutUri: input.backchannelLogoutUri === undefined || input.backchannelLogoutUri === null || input.backchannelLogoutUri === ''
      ? (input.backchannelLogoutUri === undefined ? undefined : null)
      : urls([input.backchannelLogoutUri], 'backchannel_logout_uri')![0],
  };
  if (input.public && options.allowedIps && options.allowedIps.length > 0) {
    throw new AppError(400, 'invalid_allowed_ips', 'A public client (a browser or native app, no secret) has no IP allow list');
  }
  return out;
}

/** A client logo as given (blank: none), or 400 invalid_logo_url naming what is accepted. */
export function checkLogoUrl(raw: string | null | undefined): string | null {
  const value = raw?.trim() ?? '';
  if (value === '') return null;
  const problem = logoUrlProblem(value);
  if (problem) throw new AppError(400, 'invalid_logo_url', `logo_url ${problem}`);
  return value;
}

/**
 * Normalizes an allow list; refuses bad entries (naming all of them) and, unless
 * `allowEverything` is set, ranges such as 0.0.0.0/0 that would disable the protection.
 */
export function checkAllowList(entries: string[], options: { allowEverything?: boolean } = {}): string[] {
  const { entries: normalized, invalid } = normalizeAllowList(entries);
  if (invalid.length > 0) {
    throw new AppError(400, 'invalid_allowed_ips', `Not an IP address or CIDR range: ${invalid.join(', ')}`, {
      extra: { invalid },
    });
  }
  const everything = normalized.filter(isAllowEverything);
  if (everything.length > 0 && !options.allowEverything) {
    throw new AppError(400, 'allow_everything_unconfirmed', `${everything.join(', ')} admits every address; confirm to save it`, {
      extra: { entries: everything },
    });
  }
  return normalized;
}

/** The longest grace a rotated client secret can get: 30 days (migrations/0013 refuses more in the database too). */
export const MAX_GRACE_SECONDS = 30 * 86400;

/** A grace period in whole seconds, 0 to MAX_GRACE_SECONDS: 400 invalid_grace_seconds otherwise. */
export function checkGraceSeconds(value: number): number {
  if (!Number.isSafeInteger(value) || value < 0 || value > MAX_GRACE_SECONDS) {
    throw new AppError(400, 'invalid_grace_seconds', `grace_seconds must be a whole number of seconds from 0 to ${MAX_GRACE_SECONDS}`);
  }
  return value;
}
