import type { RequestHandler, Response } from 'express';
import { z } from 'zod';
import { AppError } from './errors.ts';

/** What a value of each JSON type is called in a message. */
function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'an object';
  return typeof value === 'number' || typeof value === 'boolean' ? `a ${typeof value}` : typeof value === 'string' ? 'text' : typeof value;
}

const EXPECTED: Record<string, string> = { string: 'text', number: 'a number', int: 'a whole number', boolean: 'true or false', array: 'a list', object: 'an object' };

/*
 * Readable messages for a value of the wrong type, process-wide (zod's own global hook), for
 * every schema that does not give its own: zod's default ("Invalid input: expected string,
 * received array") reached the pages under a field a form had sent twice. A missing value is
 * "Required", a repeated form field (a list where one value was expected) "Give one value,
 * not a list", anything else "Must be text, not a number".
 */
z.config({
  customError: (issue) => {
    if (issue.code !== 'invalid_type') return undefined;
    if (issue.input === undefined) return 'Required';
    if (Array.isArray(issue.input) && issue.expected !== 'array') return 'Give one value, not a list';
    const wanted = `Must be ${EXPECTED[issue.expected] ?? issue.expected}`;
    // a number that is not the number wanted (NaN from a coerced "abc", 1.5 for a whole number)
    return typeof issue.input === 'number' && (issue.expected === 'number' || issue.expected === 'int') ? wanted : `${wanted}, not ${kindOf(issue.input)}`;
  },
});

/** Checks one part of the request against `schema` and keeps the typed result in res.locals. */
function validatePart(part: 'body' | 'query', schema: z.ZodType): RequestHandler {
  const local = part === 'body' ? 'input' : 'query';
  const what = part === 'body' ? 'The request body' : 'The query string';
  return (req, res, next) => {
    const parsed = schema.safeParse(req[part] ?? {});
    if (!parsed.success) {
      const details = parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
      throw new AppError(400, 'validation_error', `${what} is invalid`, { extra: { details } });
    }
    res.locals[local] = parsed.data;
    next();
  };
}

/**
 * Validates the JSON body against `schema`; the parsed, typed value is read with `input(res)`.
 * A failure is 400 validation_error with one detail per problem.
 */
export function validateBody(schema: z.ZodType): RequestHandler {
  return validatePart('body', schema);
}

/** Validates the query string the same way; read the result with `queryInput(res)`. */
export function validateQuery(schema: z.ZodType): RequestHandler {
  return validatePart('query', schema);
}

/** The body validated by `validateBody(schema)` earlier in the chain. */
export function input<S extends z.ZodType>(res: Response, _schema?: S): z.infer<S> {
  return res.locals.input as z.infer<S>;
}

/** The query validated by `validateQuery(schema)` earlier in the chain. */
export function queryInput<S extends z.ZodType>(res: Response, _schema?: S): z.infer<S> {
  return res.locals.query as z.infer<S>;
}

// Spaces and tabs only, as the JSON parser reads a type (a no-break space makes another type).
const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json[ \t]*(?:;|$)/i;

/**
 * API bodies are JSON: a request that carries a body of another type is 415 before any
 * parsing happens. A POST that carries cookies must say application/json even without a
 * body: a cross-site HTML form can send a cookie-authenticated POST, but not with that
 * content type (the browser would ask first, and we answer no CORS), so this closes CSRF
 * on the session-authenticated JSON API.
 */
export const requireJsonBody: RequestHandler = (req, _res, next) => {
  const hasBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
  const cookiePost = req.method === 'POST' && req.headers.cookie !== undefined;
  if ((hasBody || cookiePost) && !JSON_TYPE.test(req.headers['content-type'] ?? '')) {
    throw new AppError(415, 'unsupported_media_type', 'Send the body as application/json');
  }
  next();
};
