/** The longest logo address kept: a small data: image fits, and so does any local path. */
export const MAX_LOGO_URL_LENGTH = 15000;

const DATA_IMAGE = /^data:image\/(png|jpeg|gif|webp|svg\+xml);base64,[A-Za-z0-9+/]+={0,2}$/;
const LOCAL_ASSET = /^\/assets\/[A-Za-z0-9._~\-/]+$/;

/**
 * Why `value` cannot be a logo address, or null when it can. Only a file this service serves
 * (a path under /assets) or a base64 data: image is accepted: a page never makes the browser
 * fetch anything from a third party (the CSP's img-src allows 'self' and data: only), and
 * nothing outside this service learns who opened a sign-in page.
 */
export function logoUrlProblem(value: string): string | null {
  if (value.length > MAX_LOGO_URL_LENGTH) return `must be at most ${MAX_LOGO_URL_LENGTH} characters`;
  if (DATA_IMAGE.test(value)) return null;
  if (LOCAL_ASSET.test(value) && !value.includes('//') && !value.split('/').includes('..')) return null;
  return 'must be a path under /assets/ or a data:image/...;base64, URL (no other sites are contacted)';
}
