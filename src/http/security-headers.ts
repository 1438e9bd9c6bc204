/**
 * The security headers of every answer, in one place: the short fixed set of the API and
 * helmet's set for pages (a page whose form ends at a client system lifts its CSP's
 * form-action with allowFormTargets, src/pages/security.ts).
 */
import type { RequestHandler } from 'express';
import helmet from 'helmet';
import { isApiPath } from './api-paths.ts';

/**
 * The short fixed header set of an API answer: the body is never sniffed into something
 * else, never rendered as a document nor framed if a browser opens it, and (in production)
 * only ever asked for over https. The no-store of credential answers is set per route
 * (src/http/no-store.ts). The page headers (pageHeaders, below) would add nine more
 * that only a browser rendering a page acts on (docs/performance.md).
 */
export function apiHeaders(options: { production: boolean }): RequestHandler {
  const headers: Array<[string, string]> = [
    ['X-Content-Type-Options', 'nosniff'],
    ['Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'"],
  ];
  if (options.production) headers.push(['Strict-Transport-Security', 'max-age=15552000; includeSubDomains']);
  return (_req, res, next) => {
    for (let i = 0; i < headers.length; i++) res.setHeader(headers[i][0], headers[i][1]);
    next();
  };
}

/**
 * The directives of every page's Content-Security-Policy. Everything the pages load comes
 * from this service (no CDN), no script runs inline, and no page may be framed
 * (clickjacking of the login form). No upgrade-insecure-requests: a development instance and
 * its client systems may well be plain http on localhost. `form-action` is 'self'; a page whose form ends in
 * a redirect to a client system has none (`allowFormTargets`): browsers apply form-action to
 * the redirects that follow a form submission too, and a client's callback may send the
 * browser on to any origin.
 */
const DIRECTIVES = {
  defaultSrc: ["'self'"],
  baseUri: ["'none'"],
  connectSrc: ["'self'"],
  fontSrc: ["'self'"],
  formAction: ["'self'"],
  frameAncestors: ["'none'"],
  imgSrc: ["'self'", 'data:'],
  objectSrc: ["'none'"],
  scriptSrc: ["'self'"],
  scriptSrcAttr: ["'none'"],
  styleSrc: ["'self'"],
};

/**
 * The CSP of the API reference (/docs), drawn by Redoc (public/js/docs.js): the pages' policy
 * with two additions Redoc cannot do without, and nothing from another host. `style-src
 * 'unsafe-inline'`: Redoc's styles are made at run time (styled-components writes <style>
 * elements, and sets style attributes for the sidebar and the panels); scripts stay 'self'
 * only, so an injected style cannot run code. `worker-src blob:`: Redoc builds its search index
 * in a worker made from a Blob of its own bundle. No form on the page posts anywhere
 * (form-action 'none').
 */
export const DOCS_PAGE_CSP = [
  "default-src 'self'", "base-uri 'none'", "connect-src 'self'", "font-src 'self'", "form-action 'none'",
  "frame-ancestors 'none'", "img-src 'self' data:", "object-src 'none'", "script-src 'self'", "script-src-attr 'none'",
  "style-src 'self' 'unsafe-inline'", "worker-src blob:",
].join('; ');

/**
 * Security headers for every page (helmet): the CSP above, X-Content-Type-Options: nosniff,
 * X-Frame-Options: DENY, Referrer-Policy: no-referrer (tokens travel in URLs), HSTS only in
 * production (a development instance on http://localhost must not pin https).
 */
export function pageHeaders(options: { production: boolean }): RequestHandler {
  return helmet({
    contentSecurityPolicy: { useDefaults: false, directives: DIRECTIVES },
    frameguard: { action: 'deny' },
    referrerPolicy: { policy: 'no-referrer' },
    strictTransportSecurity: options.production ? { maxAge: 15552000, includeSubDomains: true } : false,
  });
}

/** API answers get `api`, every other answer `pages`, by the path as Express routes it (src/http/api-paths.ts). */
export function headersByKind(api: RequestHandler, pages: RequestHandler): RequestHandler {
  return (req, res, next) => (isApiPath(req.path) ? api(req, res, next) : pages(req, res, next));
}
