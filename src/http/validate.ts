import type { RequestHandler, Response } from 'express';
import { z } from 'zod';
import { AppError } from './errors.ts';

// the words of validation messages, process-wide
import '../validation/messages.ts';

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
