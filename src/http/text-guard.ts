import express, { type RequestHandler } from 'express';
import { AppError } from './errors.ts';

/**
 * Where in `value` a string holds text PostgreSQL cannot store (a NUL character) or that is
 * not well-formed UTF-16 (a lone surrogate, which cannot be encoded as UTF-8): the path to
 * the first such string, or null. Such input is always a client's mistake or an attack.
 */
export function findUnstorableText(value: unknown): string | null {
  const found = locate(value, 0);
  if (found === null) return null;
  return found.length === 0 ? '(value)' : found.reverse().join('.');
}

/**
 * The keys leading to the first unstorable string, innermost first, or null. Every request
 * body passes here: no path is built unless something is found.
 */
function locate(value: unknown, depth: number): string[] | null {
  if (typeof value === 'string') return value.includes('\0') || !value.isWellFormed() ? [] : null;
  if (depth > 20 || value === null || typeof value !== 'object') return null;
  for (const key of Object.keys(value)) {
    if (key.includes('\0') || !key.isWellFormed()) return [key];
    const found = locate((value as Record<string, unknown>)[key], depth + 1);
    if (found) {
      found.push(key);
      return found;
    }
  }
  return null;
}

function refuseUnstorable(where: string, value: unknown): void {
  const path = findUnstorableText(value);
  if (path !== null) {
    throw new AppError(400, 'validation_error', `${where} holds text that cannot be stored`, {
      extra: { details: [{ path, message: 'must not contain NUL characters or unpaired surrogates' }] },
    });
  }
}

/**
 * Refuses, as 400 validation_error, requests whose path, query or parsed body carries a NUL
 * character or a lone surrogate, before any handler passes them to the database (where they
 * would fail as a 500). Mounted once after the JSON parser; form parsers add it themselves.
 */
export const rejectUnstorableText: RequestHandler = (req, _res, next) => {
  if (/%00/i.test(req.path) || req.path.includes('\0')) refuseUnstorable('The path', '\0');
  if (req.url.includes('?')) refuseUnstorable('The query string', req.query); // no query, nothing to parse
  refuseUnstorable('The request body', req.body);
  next();
};

/** An HTML form body parser (urlencoded, flat fields; at most `limit`, default 16 KiB) followed by the same text check. */
export function formBody(options: { parameterLimit: number; limit?: string }): RequestHandler[] {
  return [express.urlencoded({ extended: false, limit: options.limit ?? '16kb', parameterLimit: options.parameterLimit }), rejectUnstorableText];
}
