import type { RequestHandler, Response } from 'express';
import type { z } from 'zod';
import { AppError } from './errors.ts';

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

/**
 * API bodies are JSON: a request that carries a body of another type is 415 before any
 * parsing happens.
 */
export const requireJsonBody: RequestHandler = (req, _res, next) => {
  const hasBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
  if (hasBody && !req.is('application/json')) {
    throw new AppError(415, 'unsupported_media_type', 'Send the body as application/json');
  }
  next();
};
