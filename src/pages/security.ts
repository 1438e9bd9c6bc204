import type { Response } from 'express';

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
