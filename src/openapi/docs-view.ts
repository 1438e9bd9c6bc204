/** The parts of a JSON Schema the reference page reads. */
interface SchemaObject {
  $ref?: string;
  const?: unknown;
  enum?: unknown[];
  anyOf?: SchemaObject[];
  oneOf?: SchemaObject[];
  type?: string;
  items?: SchemaObject;
  format?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  default?: unknown;
  required?: string[];
  properties?: Record<string, SchemaObject>;
}

interface MediaObject {
  schema?: SchemaObject;
  example?: unknown;
}

/** The parts of an OpenAPI operation the reference page reads. */
interface OperationObject {
  operationId: string;
  summary: string;
  description?: string;
  tags?: string[];
  parameters?: Array<{ name: string; in: string; required?: boolean; schema?: SchemaObject }>;
  requestBody?: { content?: Record<string, MediaObject> };
  responses?: Record<string, { description?: string; content?: Record<string, MediaObject> }>;
}

/** One field of a request body or one parameter, as the reference page lists it. */
export interface FieldRow {
  name: string;
  type: string;
  required: boolean;
}

/** One operation as the reference page shows it. */
export interface OperationView {
  anchor: string;
  method: string;
  path: string;
  summary: string;
  /** Paragraphs as safe HTML (escaped; `code` spans rendered). */
  paragraphs: string[];
  parameters: Array<FieldRow & { in: string }>;
  body?: { mediaType: string; variants: FieldRow[][]; example?: string };
  /** `descriptionHtml` is safe HTML (escaped; `code` spans rendered). */
  responses: Array<{ status: string; descriptionHtml: string; example?: string }>;
}

/** Statuses the page explains once instead of under each operation (the document lists them everywhere). */
const COMMON_STATUSES = new Set(['413', '415', '500', '503']);

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** Escapes, then renders Markdown `code` spans, the only markup the descriptions use. */
function inlineHtml(text: string): string {
  return escapeHtml(text).replace(/`([^`]+)`/g, '<code>$1</code>');
}

/** A short readable type: `string (1–256)`, `integer ≥ 1`, `one of a, b`, `array of string`. */
export function typeLabel(s: SchemaObject | undefined): string {
  if (!s || typeof s !== 'object') return 'any';
  if (s.$ref) return String(s.$ref).split('/').pop()!;
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (Array.isArray(s.enum)) return `one of ${s.enum.map((v: unknown) => JSON.stringify(v)).join(', ')}`;
  if (Array.isArray(s.anyOf)) return s.anyOf.map(typeLabel).join(' or ');
  if (Array.isArray(s.oneOf)) return s.oneOf.map(typeLabel).join(' or ');
  if (s.type === 'array') return `array of ${typeLabel(s.items)}`;
  const parts = [s.format ?? s.type ?? 'any'];
  if (s.minLength !== undefined || s.maxLength !== undefined) parts.push(`(${s.minLength ?? 0}–${s.maxLength ?? '…'} chars)`);
  if (s.minimum !== undefined) parts.push(`≥ ${s.minimum}`);
  if (s.maximum !== undefined) parts.push(`≤ ${s.maximum}`);
  if (s.default !== undefined) parts.push(`default ${JSON.stringify(s.default)}`);
  return parts.join(' ');
}

function fields(schema: SchemaObject): FieldRow[] {
  const required: string[] = schema.required ?? [];
  return Object.entries(schema.properties ?? {}).map(([name, s]) => ({ name, type: typeLabel(s), required: required.includes(name) }));
}

/** Turns the OpenAPI document into what views/docs.ejs renders, grouped by tag. */
export function docsViewModel(doc: { paths?: unknown }): Array<{ tag: string; operations: OperationView[] }> {
  const groups = new Map<string, OperationView[]>();
  for (const [path, methods] of Object.entries((doc.paths ?? {}) as Record<string, Record<string, OperationObject>>)) {
    for (const [method, op] of Object.entries(methods)) {
      const content = op.requestBody?.content;
      const [mediaType, media] = content ? Object.entries(content)[0] : [];
      const schema = media?.schema;
      const view: OperationView = {
        anchor: op.operationId,
        method: method.toUpperCase(),
        path,
        summary: op.summary,
        paragraphs: String(op.description ?? '').split('\n\n').filter(Boolean).map(inlineHtml),
        parameters: (op.parameters ?? []).map((p) => ({ name: p.name, in: p.in, type: typeLabel(p.schema), required: Boolean(p.required) })),
        body: schema && mediaType
          ? { mediaType, variants: (schema.oneOf ?? schema.anyOf ?? [schema]).map(fields), example: media?.example === undefined ? undefined : JSON.stringify(media.example, null, 2) }
          : undefined,
        // the answers every operation of a kind gives are said once at the top of the page
        responses: Object.entries(op.responses ?? {}).filter(([status]) => !COMMON_STATUSES.has(status)).map(([status, r]) => {
          const example = r.content?.['application/json']?.example;
          return { status, descriptionHtml: inlineHtml(String(r.description ?? '')), example: example === undefined ? undefined : JSON.stringify(example, null, 2) };
        }),
      };
      const tag = op.tags?.[0] ?? 'Other';
      groups.set(tag, [...(groups.get(tag) ?? []), view]);
    }
  }
  return [...groups].map(([tag, operations]) => ({ tag, operations }));
}
