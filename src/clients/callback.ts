/** What parsing a stored callback URL found, kept per URL text (see `parsedCallback`). */
interface ParsedCallback {
  usable: boolean;
  /** The URL as the URL API writes it, when it has no query and no fragment: a token can be appended as `?token=`. */
  bare: string | null;
}

/** Callback URLs parsed so far: a handful of clients, each issued many tokens. */
const parsed = new Map<string, ParsedCallback>();
/** Past this many distinct URLs the memo starts again (callbacks edited over the years). */
const MEMO_LIMIT = 512;

/**
 * Parses a callback URL once per distinct text: token issue checks and extends its client's
 * callback on every request, and URL parsing is a measurable part of that (docs/performance.md).
 */
function parsedCallback(raw: string): ParsedCallback {
  let result = parsed.get(raw);
  if (result) return result;
  try {
    const url = new URL(raw);
    const usable = (url.protocol === 'http:' || url.protocol === 'https:') && !url.username && !url.password && url.hash === '';
    result = { usable, bare: usable && !url.href.includes('?') && !url.href.includes('#') ? url.href : null };
  } catch {
    result = { usable: false, bare: null };
  }
  if (parsed.size >= MEMO_LIMIT) parsed.clear();
  parsed.set(raw, result);
  return result;
}

/**
 * Whether a stored callback URL can be redirected to: an absolute http(s) URL without
 * credentials or fragment, as URL parsing (which builds the redirect) reads it. The database
 * refuses other rows (migrations/0002_clients_as_sql.sql), but its check cannot mirror URL
 * parsing exactly (e.g. "http://1.2.3.999/"), and a client row must never turn a request
 * into a 500: callers refuse such a client with a 4xx instead.
 */
export function isUsableCallbackUrl(raw: unknown): raw is string {
  return typeof raw === 'string' && parsedCallback(raw).usable;
}

/** A value the query serializer writes as it is (application/x-www-form-urlencoded: alphanumerics and *-._). */
const QUERY_SAFE = /^[A-Za-z0-9*._-]*$/;

/**
 * The callback with `token` (and `state`) added to its query, existing query kept: what
 * `URL.searchParams.set` writes. A usable callback without a query or fragment and a token
 * the serializer leaves as it is (a JWT always is) are joined directly, the callback parsed
 * once (test/clients/callback.test.ts compares both ways).
 */
export function callbackWithToken(callbackUrl: string, token: string, state?: string): string {
  const bare = state === undefined && QUERY_SAFE.test(token) ? parsedCallback(callbackUrl).bare : null;
  if (bare !== null) return `${bare}?token=${token}`;
  const url = new URL(callbackUrl);
  url.searchParams.set('token', token);
  if (state !== undefined) url.searchParams.set('state', state);
  return url.toString();
}
