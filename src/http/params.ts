import type { Request } from 'express';
import { AppError } from './errors.ts';

/** An id in a path: a positive integer (no 0, no leading zeros) of at most nine digits. */
export const POSITIVE_ID = /^[1-9]\d{0,8}$/;

/** The numeric `:id` route parameter; anything else is 400 invalid_id. */
export function idParam(req: Request): number {
  const raw = String(req.params.id);
  if (!POSITIVE_ID.test(raw)) throw new AppError(400, 'invalid_id', 'The id must be a positive integer');
  return Number(raw);
}

/** The `:client_id` route parameter; one that no client id could be is 404 without a query. */
export function clientIdParam(req: Request): string {
  const raw = String(req.params.client_id);
  if (raw.length > 128) throw new AppError(404, 'client_not_found', 'There is no client system with this id.');
  return raw;
}
