import type { RequestHandler } from 'express';

/** Auth answers carry credentials: no cache, proxy or browser may keep them. */
export const noStore: RequestHandler = (_req, res, next) => {
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Pragma', 'no-cache');
  next();
};
