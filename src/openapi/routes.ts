import { Router } from 'express';
import { buildOpenApiDocument } from './document.ts';
import { docsViewModel } from './docs-view.ts';

/** GET /api/openapi.json (OpenAPI 3.1) and GET /docs (the same, readable; no CDN, no script). */
export function openApiRoutes(): Router {
  const document = buildOpenApiDocument(); // built once: the schemas do not change at run time
  const groups = docsViewModel(document);
  const r = Router();
  r.get('/api/openapi.json', (_req, res) => {
    res.json(document);
  });
  r.get('/docs', (_req, res) => {
    res.render('docs', { title: 'API reference', groups, info: document.info });
  });
  return r;
}
