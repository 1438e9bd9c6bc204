import type http from 'node:http';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { buildOpenApiDocument } from '../../src/openapi/document.ts';
import { ROUTES } from '../../src/routes/index.ts';

/**
 * The API reference as the contract of every answer the tests see: each response to a
 * documented operation must have a documented status, one of that status's documented media
 * types, and (for JSON) a body the documented schema accepts. A test that receives an
 * undocumented answer fails, so the document cannot drift from what the service sends.
 */
type Json = Record<string, any>;

const document = buildOpenApiDocument(ROUTES) as Json;
const DOC_ID = 'https://auth-service.invalid/openapi.json';
const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
addFormats.default(ajv);
ajv.addSchema({ ...document, $id: DOC_ID });

interface Operation {
  method: string;
  template: string;
  pattern: RegExp;
  responses: Json;
}

const operations: Operation[] = Object.entries(document.paths as Record<string, Json>).flatMap(([template, item]) =>
  Object.entries(item).map(([method, op]) => ({
    method: method.toUpperCase(),
    template,
    // literal segments before parameters: /admin/users/new is its own operation, not /admin/users/{id}
    pattern: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`),
    responses: (op as Json).responses,
  })));
operations.sort((a, b) => (a.template.match(/\{/g)?.length ?? 0) - (b.template.match(/\{/g)?.length ?? 0));

const validators = new Map<string, ReturnType<typeof ajv.getSchema>>();
function validatorFor(pointer: string) {
  if (!validators.has(pointer)) validators.set(pointer, ajv.compile({ $ref: `${DOC_ID}#${pointer}` }));
  return validators.get(pointer)!;
}
const escape = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

/** The documented operation a request is for, if any (unknown paths are not operations). */
export function operationFor(method: string, path: string): Operation | undefined {
  const bare = path.split('?')[0]!.split('#')[0]!;
  return operations.find((o) => o.method === method.toUpperCase() && o.pattern.test(bare));
}

/** Every operation of the document: `METHOD template`. */
export function documentedOperations(): Array<{ method: string; template: string; responses: Json }> {
  return operations.map(({ method, template, responses }) => ({ method, template, responses }));
}

/** Operations answered by the walk and the tests so far: `METHOD template status`. */
export const seen = new Set<string>();

/** Throws when an answer to a documented operation is not what the document says. */
export function checkAnswer(method: string, path: string, status: number, headers: http.IncomingHttpHeaders, text: string): void {
  if (method.toUpperCase() === 'HEAD' || method.toUpperCase() === 'OPTIONS') return;
  const op = operationFor(method, path);
  if (!op) return;
  const where = `${method.toUpperCase()} ${path} (${op.template}) answered ${status}`;
  const documented = op.responses[String(status)] as Json | undefined;
  if (!documented) throw new Error(`${where}: status not documented (documented: ${Object.keys(op.responses).join(', ')}); body: ${text.slice(0, 300)}`);
  seen.add(`${op.method} ${op.template} ${status}`);
  const content = documented.content as Record<string, Json> | undefined;
  if (!content || text.length === 0) return;
  const type = String(headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (!(type in content)) throw new Error(`${where} as ${type || 'no content type'}: documented as ${Object.keys(content).join(', ')}`);
  if (!content[type]!.schema || !/json$/.test(type)) return;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new Error(`${where}: ${type} body is not JSON: ${text.slice(0, 200)}`);
  }
  const validate = validatorFor(`/paths/${escape(op.template)}/${op.method.toLowerCase()}/responses/${status}/content/${escape(type)}/schema`);
  if (!validate(body)) {
    throw new Error(`${where}: body does not match the document: ${ajv.errorsText(validate.errors)}; body: ${text.slice(0, 400)}`);
  }
}
