import type { AnyRoute, DocResponse } from '../routes/declare.ts';
import * as R from './responses.ts';

export type { Access, DocResponse } from '../routes/declare.ts';

/** What the API reference reads of a route declaration: everything but the code that serves it. */
export type Operation = Omit<AnyRoute, 'handle' | 'onError' | 'before' | 'when'>;

export const err = (description: string, example?: Record<string, unknown>): DocResponse => ({ description, schema: R.errorBody, example });
export const invalid = err('The body does not match the schema', { error: 'validation_error', message: 'The request body is invalid', details: [{ path: '<field>', message: 'Required' }] });
export const limited = err('Rate limited; see Retry-After', { error: 'rate_limited', message: 'Too many requests; try again later', retry_after: 42 });
export const unauthenticated = err('No session or access token', { error: 'unauthenticated', message: 'Sign in first' });
export const forbidden = err('Signed in, but not an administrator', { error: 'forbidden', message: 'Administrators only' });
export const badClient = err('Invalid client credentials', { error: 'invalid_client', message: 'Invalid client credentials' });
export const html = (description: string): DocResponse => ({ description, mediaType: 'text/html' });
export const redirect = (description: string): DocResponse => ({ description });
export const ipNotAllowed = err('Caller IP not on the allow list', { error: 'ip_not_allowed', message: 'This address may not call this endpoint' });
/** A page's error: an HTML page, or the JSON error to a caller that asks for JSON (`Accept: application/json`). */
export const pageError = (description: string): DocResponse => ({ description, mediaType: 'text/html', alternatives: [{ mediaType: 'application/json', schema: R.errorBody }] });
