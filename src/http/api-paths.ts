/**
 * Which requests the API answers (for programs: JSON errors, the API's short header set) and
 * which are pages, decided as Express routes them, so that a request an API handler serves is
 * never dressed as a page. Express's router matches a path in any letter case (the app leaves
 * `case sensitive routing` off), with or without one trailing slash, against the pathname it
 * reads with parseurl (`req.path`): `/API/SSO/TOKEN` reaches the token route and `/HEALTHZ/`
 * the probe, while `/apis` is no API path at all.
 */

/** `/api` and everything under it, as `app.use('/api', …)` matches (src/app.ts). */
const API = /^\/api(?:\/|$)/i;

/** The probes, as their routes match (src/health/routes.ts). Metrics have a listener of their own (src/metrics/listener.ts). */
const PROBES = /^\/(?:healthz|readyz)\/?$/i;

/**
 * Whether Express routes `pathname` (a request's `req.path`) to the JSON API or a probe: the
 * answers read by programs. Everything else (pages, forms, assets, the reference at /docs)
 * is a page.
 */
export function isApiPath(pathname: string): boolean {
  return API.test(pathname) || PROBES.test(pathname);
}

/** Whether Express routes `pathname` to a probe (/healthz, /readyz). */
export function isProbePath(pathname: string): boolean {
  return PROBES.test(pathname);
}
