/**
 * Prints the OpenAPI document the service serves at /api/openapi.json, built from the route
 * declarations without starting the service (no database, no configuration):
 *
 *   node --import tsx scripts/openapi-document.ts > openapi.json
 *
 * `npm run lint:openapi` (scripts/lint-openapi.sh) lints it with Redocly.
 */
import { buildOpenApiDocument } from '../src/openapi/document.ts';
import { ROUTES } from '../src/routes/index.ts';

process.stdout.write(`${JSON.stringify(buildOpenApiDocument(ROUTES), null, 2)}\n`);
