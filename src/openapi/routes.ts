import { html } from './operation.ts';
import { route } from '../routes/declare.ts';
import { buildOpenApiDocument } from './document.ts';
import { docsViewModel } from './docs-view.ts';

/** GET /api/openapi.json (OpenAPI 3.1) and GET /docs (the same, readable; no CDN, no script). */
export const OPENAPI_ROUTES = [
  route({
    method: 'get', path: '/api/openapi.json', tag: 'Operations', access: 'public', limit: 'none', cacheable: true, sessionless: true,
    summary: 'This API reference as OpenAPI 3.1',
    responses: { 200: { description: 'The document (OpenAPI 3.1)', mediaType: 'application/json' } },
    handle: (_s, routes) => {
      const document = buildOpenApiDocument(routes); // built once: the declarations do not change at run time
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
      const document = buildOpenApiDocument(routes);
      const groups = docsViewModel(document);
      return ({ res }) => {
        res.render('docs', { title: 'API reference', groups, info: document.info });
      };
    },
  }),
];
