import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/** Where Redoc's attribution link would load its logo from: the vendor's CDN. */
const CDN_LOGO = 'https://cdn.redoc.ly/redoc/logo-mini.svg';

/**
 * Redoc's standalone bundle (redoc/bundles/redoc.standalone.js, the package's own file) for the
 * API reference (/docs), read at its first request. One string differs from the file as shipped: the sidebar's
 * "API docs by Redocly" logo, which Redoc always loads from its CDN (there is no option for
 * it), is this service's icon instead, so the page asks no other host for anything.
 */
let body: string | undefined;

export function redocBundle(): string {
  body ??= readFileSync(createRequire(import.meta.url).resolve('redoc/bundles/redoc.standalone.js'), 'utf8')
    .replaceAll(CDN_LOGO, '/assets/favicon.svg');
  return body;
}
