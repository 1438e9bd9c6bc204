/**
 * Whether a stored callback URL can be redirected to: an absolute http(s) URL without
 * credentials or fragment, as URL parsing (which builds the redirect) reads it. The database
 * refuses other rows (migrations/0002_clients_as_sql.sql), but its check cannot mirror URL
 * parsing exactly (e.g. "http://1.2.3.999/"), and a client row must never turn a request
 * into a 500: callers refuse such a client with a 4xx instead.
 */
export function isUsableCallbackUrl(raw: unknown): raw is string {
  if (typeof raw !== 'string') return false;
  try {
    const url = new URL(raw);
    return (url.protocol === 'http:' || url.protocol === 'https:') && !url.username && !url.password && url.hash === '';
  } catch {
    return false;
  }
}
