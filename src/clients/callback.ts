/** A stored callback URL as parsing found it, kept per URL text (see `parsedCallback`). */
interface ParsedCallback {
  usable: boolean;
  /** The URL as the URL API writes it, up to its query: scheme, host, port, path. */
  base: string;
  /** The query's `&`-separated pieces as the URL parser keeps them: its escapes and `+` as registered. */
  pieces: string[];
  /** Each piece's name as `URLSearchParams` reads it (`+` a space, escapes decoded). */
  names: string[];
  /** The fragment with its `#` (the empty string when there is none). */
  fragment: string;
  /** `base?query&` (or `base?`) when no piece is named `token` or `state`: the token is simply appended. */
  head: string | null;
}

/** Callback URLs parsed so far: a handful of clients, each issued many tokens. */
const parsed = new Map<string, ParsedCallback | null>();
/** Past this many distinct URLs the memo starts again (callbacks edited over the years). */
const MEMO_LIMIT = 512;

/** The name of one query piece (`name=value`) as `URLSearchParams` decodes it. */
function pieceName(piece: string): string {
  // the leading '&' keeps a piece that starts with '?' from losing it (the constructor strips one)
  return new URLSearchParams(`&${piece}`).keys().next().value ?? '';
}

/** A query ready for one more parameter: `&` added unless it is empty or already ends with one. */
const withSeparator = (query: string) => (query === '' || query.endsWith('&') ? query : `${query}&`);

/** Splits a parsed URL into what `callbackWithToken` keeps and where the token goes. */
function splitCallback(url: URL): ParsedCallback {
  const usable = (url.protocol === 'http:' || url.protocol === 'https:') && !url.username && !url.password && url.hash === '';
  // in a serialized URL the first '#' starts the fragment and the first '?' before it the
  // query: both are escaped everywhere else
  const href = url.href;
  const hashAt = href.indexOf('#');
  const end = hashAt === -1 ? href.length : hashAt;
  const beforeFragment = href.slice(0, end);
  const questionAt = beforeFragment.indexOf('?');
  const base = questionAt === -1 ? beforeFragment : beforeFragment.slice(0, questionAt);
  const query = questionAt === -1 ? '' : beforeFragment.slice(questionAt + 1);
  const pieces = query === '' ? [] : query.split('&');
  const names = pieces.map(pieceName);
  const head = names.includes('token') || names.includes('state') ? null : `${base}?${withSeparator(query)}`;
  return { usable, base, pieces, names, fragment: href.slice(end), head };
}

/**
 * Parses a callback URL once per distinct text: token issue checks and extends its client's
 * callback on every request, and URL parsing is a measurable part of that (docs/performance.md).
 * `null`: the text is no URL.
 */
function parsedCallback(raw: string): ParsedCallback | null {
  let result = parsed.get(raw);
  if (result !== undefined) return result;
  try {
    result = splitCallback(new URL(raw));
  } catch {
    result = null;
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
  return typeof raw === 'string' && parsedCallback(raw)?.usable === true;
}

/** A query value percent-encoded as a URI component (a space is `%20`, never `+`). */
const queryValue = (value: string) => encodeURIComponent(value.toWellFormed());

/**
 * The callback with `token` (and `state`) added to its query, the registered query kept as
 * it is written: a receiver reads its own parameters with the bytes it registered, whether or
 * not it decodes `+` as a space. As `URL.searchParams.set` does, the first parameter already
 * named `token` (or `state`, when one is given) takes the new value in place and any others
 * of that name are dropped; otherwise it is appended. A JWT is written as it is.
 */
export function callbackWithToken(callbackUrl: string, token: string, state?: string): string {
  const callback = parsedCallback(callbackUrl);
  if (callback === null) throw new TypeError(`Invalid URL: ${callbackUrl}`);
  const tokenPiece = `token=${queryValue(token)}`;
  const statePiece = state === undefined ? null : `state=${queryValue(state)}`;
  if (callback.head !== null) {
    return `${callback.head}${tokenPiece}${statePiece === null ? '' : `&${statePiece}`}${callback.fragment}`;
  }
  const kept: string[] = [];
  let tokenPlaced = false;
  let statePlaced = statePiece === null;
  callback.pieces.forEach((piece, i) => {
    const name = callback.names[i];
    if (name === 'token') {
      if (!tokenPlaced) kept.push(tokenPiece);
      tokenPlaced = true;
    } else if (name === 'state' && statePiece !== null) {
      if (!statePlaced) kept.push(statePiece);
      statePlaced = true;
    } else {
      kept.push(piece);
    }
  });
  const added = [tokenPlaced ? null : tokenPiece, statePlaced ? null : statePiece].filter((p) => p !== null);
  const query = added.length === 0 ? kept.join('&') : withSeparator(kept.join('&')) + added.join('&');
  return `${callback.base}?${query}${callback.fragment}`;
}
