import { type HttpResponse, send, type Target } from '../helpers/http.ts';

/**
 * A browser-like HTTP client (to the app in-process, or to a server's URL) for page tests that need no real browser: keeps cookies,
 * posts urlencoded forms, never follows redirects (tests look at each answer).
 */
export function formSession(target: Target) {
  const cookies = new Map<string, string>();
  const remember = (res: HttpResponse) => {
    const set = res.headers['set-cookie'] ?? [];
    for (const line of set) {
      const [pair] = line.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      if (/expires=Thu, 01 Jan 1970/i.test(line) || value === '') cookies.delete(name);
      else cookies.set(name, value);
    }
    return res;
  };
  const headers = (extra: Record<string, string> = {}) => ({
    accept: 'text/html,application/xhtml+xml',
    ...(cookies.size ? { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; ') } : {}),
    ...extra,
  });
  return {
    cookies,
    get: async (path: string, extra?: Record<string, string>) => remember(await send(target, relative(path), { method: 'GET', headers: headers(extra) })),
    /** Posts `fields` as a browser would: a list (ticked checkboxes of one name) as that name repeated. */
    post: async (path: string, fields: Record<string, string | string[]> | URLSearchParams, extra?: Record<string, string>) =>
      remember(await send(target, relative(path), {
        method: 'POST',
        headers: headers({ 'content-type': 'application/x-www-form-urlencoded', ...extra }),
        body: (fields instanceof URLSearchParams ? fields
          : new URLSearchParams(Object.entries(fields).flatMap(([k, v]) => ([] as string[]).concat(v).map((x) => [k, x])))).toString(),
      })),
  };
}

/** A path, from a path or from a whole URL the app wrote (a redirect's Location). */
function relative(pathOrUrl: string): string {
  if (!/^https?:/.test(pathOrUrl)) return pathOrUrl;
  const u = new URL(pathOrUrl);
  return u.pathname + u.search;
}

/** The value of a hidden input in a rendered page (e.g. `_csrf`, `pending_key`). */
export function hiddenField(html: string, name: string): string {
  const match = html.match(new RegExp(`name="${name}" value="([^"]*)"`));
  if (!match) throw new Error(`no hidden field ${name} in the page`);
  return match[1].replace(/&#34;/g, '"').replace(/&amp;/g, '&');
}
