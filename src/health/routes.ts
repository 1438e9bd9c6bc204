import { Router } from 'express';
import type { Db } from '../db/db.ts';
import { findSchemaProblems } from '../db/schema-check.ts';

/**
 * GET /healthz: the process answers. GET /readyz: the database answers and can serve the
 * service (every table and column it uses, the rights to write them: the start-up check,
 * run again on each probe so a table dropped or a grant revoked later takes the instance
 * out of the load balancer), else 503 with the reason.
 */
export function healthRoutes(deps: { db: Db }): Router {
  const r = Router();
  r.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  r.get('/readyz', async (_req, res) => {
    let problems: string[];
    try {
      problems = await findSchemaProblems(deps.db);
    } catch {
      res.status(503).json({ error: 'not_ready', message: 'The database does not answer' });
      return;
    }
    if (problems.length > 0) {
      res.status(503).json({ error: 'not_ready', message: `The database cannot be used: ${problems.join('; ')}` });
      return;
    }
    res.json({ status: 'ready', database: deps.db.kind });
  });
  return r;
}
