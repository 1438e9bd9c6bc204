import { z } from 'zod';
import { SESSION_COOKIE } from '../http/session.ts';
import type { AnyRoute } from '../routes/declare.ts';
import { badClient, type DocResponse, err, forbidden, invalid, ipNotAllowed, limited, type Operation, pageError, redirect, unauthenticated } from './operation.ts';
import { errorBody } from './responses.ts';

type JsonSchema = Record<string, unknown>;

const ACCESS_TEXT: Record<Operation['access'], string> = {
  public: 'No authentication.',
  client: 'Client credentials (`client_id`, `client_secret`) in the JSON body.',
  'client+ip': 'Client credentials in the JSON body, and the caller\'s IP on the client\'s allow list (else 403 ip_not_allowed).',
  user: 'A session cookie (`POST /api/auth/login`) or an access token (`POST /api/login`) as `Authorization: Bearer`.',
  admin: 'As a user, with role `admin`.',
  page: 'A page in a browser; POST forms carry the session\'s CSRF token `_csrf`.',
  'page-user': 'A page for a signed-in user (browser session; otherwise 303 to /login); POST forms carry the CSRF token `_csrf`.',
  'page-admin': 'A page for an administrator (browser session; otherwise 303 to /login, 403 without role admin); POST forms carry the CSRF token `_csrf`.',
};
/** Routes that answer without the database or Redis, so never with an outage. */
const NO_STORE_PATHS = new Set(['/healthz', '/readyz', '/api/openapi.json', '/docs']);
const OUTAGE_DESCRIPTION = 'service_unavailable: the database (or Redis) cannot be reached or timed out; nothing was done. '
  + 'Try again after the Retry-After header\'s seconds. A browser gets a short "try again" page.';

const LIMIT_TEXT: Record<NonNullable<Operation['limit']>, string> = {
  none: 'Rate limit: none.',
  tokenIssue: 'Rate limit: token issue, per client system (default 100/min).',
  login: 'Rate limit: login endpoints, per IP address (default 10/min).',
  validation: 'Rate limit: token validation, per client system (default 100/min).',
  user: 'Rate limit: user management, per user (default 50/min).',
  userWhenSignedIn: 'Rate limit: for a signed-in user, who gets a token at once, the user-management limit per user (default 50/min); none for anyone else.',
};

/** JSON Schema (2020-12, which OpenAPI 3.1 uses) of what a zod schema accepts as input. */
export function inputSchema(schema: z.ZodType): JsonSchema {
  return strip(z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any', reused: 'inline' }) as JsonSchema);
}

/**
 * JSON Schema of an answer. Schemas named with `.meta({id})` become components: their
 * definitions move to `components` and the references point there.
 */
function outputSchema(schema: z.ZodType, components: Record<string, JsonSchema>): JsonSchema {
  return hoistDefs(strip(z.toJSONSchema(schema, { io: 'output', unrepresentable: 'any', reused: 'inline' }) as JsonSchema), components) as JsonSchema;
}

function hoistDefs(node: unknown, components: Record<string, JsonSchema>): unknown {
  if (Array.isArray(node)) return node.map((n) => hoistDefs(n, components));
  if (node === null || typeof node !== 'object') return node;
  const out: JsonSchema = {};
  for (const [k, v] of Object.entries(node as JsonSchema)) {
    if (k === '$defs') {
      for (const [name, def] of Object.entries(v as Record<string, JsonSchema>)) components[name] ??= hoistDefs(strip(def), components) as JsonSchema;
    } else if (k === '$ref' && typeof v === 'string') {
      out[k] = v.replace(/^#\/\$defs\//, '#/components/schemas/');
    } else {
      out[k] = hoistDefs(v, components);
    }
  }
  return out;
}

/** Drops the `$schema` marker and the `id` meta (the document names components itself). */
function strip(schema: JsonSchema): JsonSchema {
  const { $schema: _s, id: _i, ...rest } = schema;
  return rest;
}

/**
 * The answers every operation of a kind can give, whatever it does: those of its guard, its
 * limit, its body parser. The operation's own entries override these.
 */
function implicitResponses(op: Operation): Record<number, DocResponse> {
  const r: Record<number, DocResponse> = {};
  const page = op.access.startsWith('page');
  const api = op.path.startsWith('/api/');
  if (api && op.method !== 'get' && op.method !== 'delete') {
    r[415] = err('The body is not `application/json` (`unsupported_media_type`); a POST that carries a cookie must say `application/json` even without a body', { error: 'unsupported_media_type', message: 'Send the body as application/json' });
    r[413] = err('The body is over 16 KiB (`payload_too_large`)', { error: 'payload_too_large', message: 'The request body is too large' });
    r[400] = op.body ? invalid : err('The body is not valid JSON (`invalid_json`)', { error: 'invalid_json', message: 'The request body is not valid JSON' });
  }
  if (op.access === 'client' || op.access === 'client+ip') r[401] = badClient;
  if (op.access === 'client+ip') r[403] = ipNotAllowed;
  if (op.access === 'user' || op.access === 'admin') r[401] = unauthenticated;
  if (op.access === 'admin') r[403] = forbidden;
  if (op.access === 'page-user' || op.access === 'page-admin') r[303] = redirect('Not signed in in a browser session: to /login (back here after sign-in)');
  if (op.access === 'page-admin') r[403] = pageError('Signed in without role admin (`forbidden`)');
  if (page && op.bodyType === 'form') {
    r[403] ??= pageError('Missing or wrong CSRF token (`invalid_csrf_token`)');
    r[413] = pageError('The form is over 16 KiB or has too many fields');
  }
  if (op.limit && op.limit !== 'none') r[429] = page ? pageError('Rate limited; see Retry-After') : limited;
  if (op.access === 'client' || op.access === 'client+ip') {
    r[429] ??= err('Too many failed client authentications for this client from this address (`rate_limited`); see Retry-After',
      { error: 'rate_limited', message: 'Too many failed client authentications for this client from this address; try again later', retry_after: 42 });
  }
  // NUL and lone surrogates in the path, query or body are refused before any route code runs
  r[400] ??= page ? pageError('The path, query or form holds text that cannot be stored') : err('The path, query or body holds text that cannot be stored (`validation_error`)');
  r[500] = page ? pageError('An unexpected error; the page shows the request id to quote') : err('An unexpected error (`internal_error`); quote `request_id` when reporting it', { error: 'internal_error', message: 'Internal server error', request_id: 'req-8f2c1a' });
  return r;
}

/** `/api/webhooks/:id` -> `/api/webhooks/{id}` */
export function openApiPath(expressPath: string): string {
  return expressPath.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');
}

function operationObject(op: Operation, components: Record<string, JsonSchema>): JsonSchema {
  const parameters: JsonSchema[] = [...op.path.matchAll(/:([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => ({
    name: m[1], in: 'path', required: true, schema: { type: 'string' },
  }));
  if (op.query) {
    const q = inputSchema(op.query) as { properties?: Record<string, JsonSchema>; required?: string[] };
    for (const [name, schema] of Object.entries(q.properties ?? {})) {
      parameters.push({ name, in: 'query', required: (q.required ?? []).includes(name), schema });
    }
  }
  const description = [op.description, ACCESS_TEXT[op.access], op.limit && LIMIT_TEXT[op.limit]].filter(Boolean).join('\n\n');
  const responses: Record<string, JsonSchema> = {};
  // the route's own headers are on every answer it gives (docs/declaring-routes.md)
  const ownHeaders = Object.fromEntries(Object.entries(op.headers ?? {}).map(([name, value]) => [name, { description: 'On every answer of this operation', schema: { type: 'string', const: value } }]));
  const implicit = implicitResponses(op);
  for (const [status, own] of Object.entries({ ...implicit, ...op.responses })) {
    // a form's own 400 (the page again, the field marked) is also the error page of the text
    // check before it, which answers JSON to a client that does not ask for HTML
    const r = own !== implicit[Number(status)] && status === '400' && op.bodyType === 'form' && op.access.startsWith('page') && own.mediaType === 'text/html' && !own.alternatives
      ? { ...own, alternatives: implicit[400]!.alternatives } : own;
    const main = r.schema
      ? { [r.mediaType ?? 'application/json']: { schema: outputSchema(r.schema, components), ...(r.example !== undefined ? { example: r.example } : {}) } }
      : r.mediaType ? { [r.mediaType]: {} } : {};
    const content: JsonSchema = { ...main };
    for (const alt of r.alternatives ?? []) content[alt.mediaType] = alt.schema ? { schema: outputSchema(alt.schema, components) } : {};
    const headers = { ...ownHeaders, ...Object.fromEntries(Object.entries(r.headers ?? {}).map(([name, description]) => [name, { description, schema: { type: 'string' } }])) };
    responses[status] = { description: r.description, ...(Object.keys(headers).length ? { headers } : {}), ...(Object.keys(content).length ? { content } : {}) };
  }
  if (!NO_STORE_PATHS.has(op.path) && !('503' in responses)) {
    responses['503'] = {
      description: OUTAGE_DESCRIPTION,
      headers: { ...ownHeaders, 'Retry-After': { description: 'Seconds to wait before trying again', schema: { type: 'integer' } } },
      content: {
        ...(op.access.startsWith('page') ? { 'text/html': {} } : {}),
        'application/json': { schema: outputSchema(errorBody, components) },
      },
    };
  }
  return {
    tags: [op.tag],
    summary: op.summary,
    description,
    operationId: op.path === '/' ? `${op.method}Root` : `${op.method}${op.path.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
    ...(parameters.length ? { parameters } : {}),
    ...(op.body
      ? {
          requestBody: {
            required: !op.bodyOptional,
            content: {
              [op.bodyType === 'form' ? 'application/x-www-form-urlencoded' : 'application/json']: {
                schema: inputSchema(op.body),
                ...(op.example !== undefined ? { example: op.example } : {}),
              },
            },
          },
        }
      : {}),
    ...securityOf(op),
    responses,
  };
}

/**
 * Who may call, as OpenAPI security requirements (docs/contract.md, "The API reference").
 * Client credentials travel in the JSON body, which no OpenAPI security scheme can describe:
 * those operations need no header or cookie (`security: []`), their body schema requires
 * `client_id` and `client_secret`, and `x-client-credentials` says so to tools and readers.
 */
function securityOf(op: Operation): JsonSchema {
  switch (op.access) {
    case 'user':
    case 'admin':
      return { security: [{ session: [] }, { bearer: [] }] };
    case 'page-user':
    case 'page-admin':
      return { security: [{ session: [] }] };
    case 'page':
      // a browser page: anyone may open it; a session, when the browser has one, is used
      return { security: [{}, { session: [] }] };
    case 'client':
    case 'client+ip':
      return { security: [], 'x-client-credentials': { in: 'body', fields: ['client_id', 'client_secret'], ipAllowList: op.access === 'client+ip' } };
    default:
      return { security: [] };
  }
}

/** The OpenAPI 3.1 document of every operation in the table, built from the request schemas. */
export function buildOpenApiDocument(routes: readonly AnyRoute[], info: { version?: string } = {}): JsonSchema {
  const operations: readonly Operation[] = routes;
  const paths: Record<string, Record<string, JsonSchema>> = {};
  const schemas: Record<string, JsonSchema> = {};
  for (const op of operations) {
    (paths[openApiPath(op.path)] ??= {})[op.method] = operationObject(op, schemas);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Authentication service',
      version: info.version ?? '0.1.0',
      description: 'Single-use SSO tokens for client systems, user sign-in, webhooks. Every error is JSON `{error, message}` with a stable snake_case `error` code; every answer carries `X-Request-Id`.',
    },
    // relative: the service itself, at the address this document was fetched from
    servers: [{ url: '/', description: 'This service (PUBLIC_URL)' }],
    tags: [...new Set(operations.map((o) => o.tag))].map((name) => ({ name })),
    paths,
    components: {
      schemas,
      securitySchemes: {
        session: { type: 'apiKey', in: 'cookie', name: SESSION_COOKIE, description: 'Session cookie set by POST /api/auth/login or the sign-in pages' },
        bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'Access token from POST /api/login' },
      },
    },
  };
}
