import { Router } from 'express';
import type { Db } from '../db/db.ts';

/** GET /healthz: the process answers. GET /readyz: the database answers too. */
export function healthRoutes(deps: { db: Db }): Router {
  const r = Router();
  r.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  r.get('/readyz', async (_req, res) => {
    try {
      await deps.db.query('SELECT 1');
      res.json({ status: 'ready', database: deps.db.kind });
    } catch {
      res.status(503).json({ error: 'not_ready', message: 'The database does not answer' });
    }
  });
  return r;
}
