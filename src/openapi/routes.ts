import { html } from './operation.ts';
import { type AnyRoute, route } from '../routes/declare.ts';
import { buildOpenApiDocument } from './document.ts';
import { DOCS_PAGE_CSP } from '../http/security-headers.ts';
import { redocBundle } from './redoc-bundle.ts';

type Reference = { document: ReturnType<typeof buildOpenApiDocument> };
const references = new WeakMap<readonly AnyRoute[], Reference>();

/**
 * The document of a route table, built once per table: the declarations
 * do not change at run time, and building them takes tens of milliseconds, which every app
 * built from the table (several instances in one process, each test's app) would pay again.
 * Nothing changes the document after it is built: it is only serialized and rendered.
 */
function referenceOf(routes: readonly AnyRoute[]): Reference {
  let reference = references.get(routes);
  if (!reference) {
    reference = { document: buildOpenApiDocument(routes) };
    references.set(routes, reference);
  }
  return reference;
}

/** GET /api/openapi.json (OpenAPI 3.1) and GET /docs (the same, drawn by Redoc from this service's own files). */
export const OPENAPI_ROUTES = [
  route({
    method: 'get', path: '/api/openapi.json', tag: 'Operations', access: 'public', limit: 'none', cacheable: true, sessionless: true,
    summary: 'This API reference as OpenAPI 3.1',
    responses: { 200: { description: 'The document (OpenAPI 3.1)', mediaType: 'application/json' } },
    handle: (_s, routes) => {
      const { document } = referenceOf(routes);
      return ({ res }) => {
        res.json(document);
      };
    },
  }),
  route({
    method: 'get', path: '/docs', tag: 'Operations', access: 'public', limit: 'none', cacheable: true, sessionless: true,
    summary: 'This API reference, readable',
    responses: { 200: html('The reference page') },
    handle: (_s, routes) => {
      const { document } = referenceOf(routes);
      return ({ res }) => {
        res.setHeader('Content-Security-Policy', DOCS_PAGE_CSP);
        res.render('docs', { title: 'API reference', info: document.info });
      };
    },
  }),
  route({
    method: 'get', path: '/assets/vendor/redoc.standalone.js', tag: 'Operations', access: 'public', limit: 'none', cacheable: true, sessionless: true,
    summary: "The API reference's renderer (Redoc's standalone bundle)",
    responses: { 200: { description: 'The script', mediaType: 'application/javascript' } },
    handle: () => ({ res }) => {
      res.setHeader('Cache-Control', 'public, max-age=3600');
      res.type('application/javascript').send(redocBundle());
    },
  }),
];
