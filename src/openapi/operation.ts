import type { z } from 'zod';
import * as R from './responses.ts';

import type { Access, DocResponse, LimitName } from '../routes/declare.ts';

export type { Access, DocResponse } from '../routes/declare.ts';

/** One row of the API reference: a route the app mounts, and the zod schemas it validates with. */
export interface Operation {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** Express syntax, exactly as mounted: `/api/webhooks/:id`. */
  path: string;
  tag: string;
  summary: string;
  description?: string;
  access: Access;
  /** The schema the route validates its body with (validateBody). */
  body?: z.ZodType;
  /** The body may be left out (every field is optional, e.g. rotate-secret's grace_seconds). */
  bodyOptional?: boolean;
  /** `form` for HTML forms (application/x-www-form-urlencoded). */
  bodyType?: 'json' | 'form';
  /** An example body; the reference test checks it validates against `body`. */
  example?: unknown;
  /** The schema the route validates its query string with (validateQuery). */
  query?: z.ZodType;
  /** The rate limit that applies (docs/contract.md, Limits), or none. */
  limit?: LimitName | 'none';
  responses: Record<number, DocResponse>;
}

export const err = (description: string, example?: Record<string, unknown>): DocResponse => ({ description, schema: R.errorBody, example });
export const invalid = err('The body does not match the schema', { error: 'validation_error', message: 'The request body is invalid', details: [{ path: '<field>', message: 'Invalid input' }] });
export const limited = err('Rate limited; see Retry-After', { error: 'rate_limited', message: 'Too many requests; try again later', retry_after: 42 });
export const unauthenticated = err('No session or access token', { error: 'unauthenticated', message: 'Sign in first' });
export const forbidden = err('Signed in, but not an administrator', { error: 'forbidden', message: 'Administrators only' });
export const badClient = err('Invalid client credentials', { error: 'invalid_client', message: 'Invalid client credentials' });
export const html = (description: string): DocResponse => ({ description, mediaType: 'text/html' });
export const redirect = (description: string): DocResponse => ({ description });
export const ipNotAllowed = err('Caller IP not on the allow list', { error: 'ip_not_allowed', message: 'This address may not call this endpoint' });
/** A page's error: an HTML page, or the JSON error to a caller that asks for JSON (`Accept: application/json`). */
export const pageError = (description: string): DocResponse => ({ description, mediaType: 'text/html', alternatives: [{ mediaType: 'application/json', schema: R.errorBody }] });
