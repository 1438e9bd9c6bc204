import type { Response } from 'express';

/**
 * Lifts `form-action` from this page's Content-Security-Policy, for a page whose form ends in
 * a redirect to a client system (`urls`: the registered callback URLs, never anything from
 * the request; nothing is lifted without one). Browsers (Chromium) apply form-action to every
 * redirect that follows a form's post, and a client's callback commonly sends the browser on
 * to its application on another origin once it has the token: no list of origins this
 * service knows can allow that chain. The page keeps the rest of its policy (scripts and
 * styles from this service only, no inline script, no framing), and everything shown on it is
 * escaped.
 */
export function allowFormTargets(res: Response, urls: string[]): void {
  const csp = res.getHeader('Content-Security-Policy');
  if (typeof csp !== 'string' || urls.length === 0) return;
  res.setHeader('Content-Security-Policy', csp.split(';').filter((d) => !/^\s*form-action\b/.test(d)).join(';'));
}
