import type { RequestHandler, Response } from 'express';
import helmet from 'helmet';

/**
 * The directives of every answer's Content-Security-Policy. Everything the pages load comes
 * from this service (no CDN), no script runs inline, and no page may be framed
 * (clickjacking of the login form). No upgrade-insecure-requests: a development instance and
 * its client systems may well be plain http on localhost. `form-action` starts at 'self'; a page whose form ends in
 * a redirect to a client system widens it with `allowFormTargets`, because browsers apply
 * form-action to the redirects that follow a form submission too.
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
 * Security headers for every answer (helmet): the CSP above, X-Content-Type-Options: nosniff,
 * X-Frame-Options: DENY, Referrer-Policy: no-referrer (tokens travel in URLs), HSTS only in
 * production (a development instance on http://localhost must not pin https).
 */
export function securityHeaders(options: { production: boolean }): RequestHandler {
  return helmet({
    contentSecurityPolicy: { useDefaults: false, directives: DIRECTIVES },
    frameguard: { action: 'deny' },
    referrerPolicy: { policy: 'no-referrer' },
    strictTransportSecurity: options.production ? { maxAge: 15552000, includeSubDomains: true } : false,
  });
}

/**
 * Lets this page's forms end in a redirect to the given URLs' origins (the registered
 * callback URLs of client systems, never anything from the request).
 */
export function allowFormTargets(res: Response, urls: string[]): void {
  const origins = new Set<string>();
  for (const raw of urls) {
    try {
      const { origin } = new URL(raw);
      if (origin !== 'null') origins.add(origin);
    } catch {
      // a callback that does not parse is refused when used; nothing to allow
    }
  }
  const csp = res.getHeader('Content-Security-Policy');
  if (typeof csp !== 'string' || origins.size === 0) return;
  res.setHeader(
    'Content-Security-Policy',
    csp.replace(/form-action 'self'/, `form-action 'self' ${[...origins].join(' ')}`),
  );
}
