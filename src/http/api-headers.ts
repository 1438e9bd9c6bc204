import type { RequestHandler } from 'express';

/**
 * The answers that are read by programs, not shown in a browser: the JSON API and the probes.
 * Everything else (pages, forms, assets, the API reference at /docs) is a page.
 */
export function isApiPath(url: string): boolean {
  return url.startsWith('/api/') || url === '/healthz' || url === '/readyz' || url === '/metrics'
    || url.startsWith('/healthz?') || url.startsWith('/readyz?') || url.startsWith('/metrics?');
}

/**
 * The short fixed header set of an API answer: the body is never sniffed into something
 * else, never rendered as a document nor framed if a browser opens it, and (in production)
 * only ever asked for over https. The no-store of credential answers is set per route
 * (src/http/no-store.ts). helmet's page headers (src/pages/security.ts) would add nine more
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

/** API answers get `api`, every other answer `pages`. */
export function headersByKind(api: RequestHandler, pages: RequestHandler): RequestHandler {
  return (req, res, next) => (isApiPath(req.url) ? api(req, res, next) : pages(req, res, next));
}
