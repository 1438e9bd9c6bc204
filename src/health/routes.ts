import { findSchemaProblems } from '../db/schema-check.ts';
import { err } from '../openapi/operation.ts';
import * as R from '../openapi/responses.ts';
import { route } from '../routes/declare.ts';

/**
 * GET /healthz: the process answers. GET /readyz: the database answers and can serve the
 * service (every table and column it uses, the rights to write them: the start-up check,
 * run again on each probe so a table dropped or a grant revoked later takes the instance
 * out of the load balancer), else 503 with the reason; 503 too while a seed refused at start
 * (SEED_ON_START) keeps the instance unready.
 */
export const HEALTH_ROUTES = [
  route({
    method: 'get', path: '/healthz', tag: 'Operations', access: 'public', limit: 'none', cacheable: true, sessionless: true,
    summary: 'Liveness: the process answers',
    responses: { 200: { description: 'Alive', schema: R.health, example: { status: 'ok' } } },
    handle: () => ({ res }) => {
      res.json({ status: 'ok' });
    },
  }),
  route({
    method: 'get', path: '/readyz', tag: 'Operations', access: 'public', limit: 'none', cacheable: true, sessionless: true,
    summary: 'Readiness: the database answers and can serve the service',
    responses: {
      200: { description: 'Ready', schema: R.ready, example: { status: 'ready', database: 'postgres' } },
      503: err('The database does not answer, or lacks a table, a column or a right the service needs, or the seed applied at start (SEED_ON_START) was refused (the message names it)', { error: 'not_ready', message: 'The database cannot be used: missing tables: sso_tokens' }),
    },
    handle: ({ deps: { db, readiness } }) => async ({ res }) => {
      if (readiness?.reason) {
        res.status(503).json({ error: 'not_ready', message: readiness.reason });
        return;
      }
      let problems: string[];
      try {
        problems = await findSchemaProblems(db);
      } catch {
        res.status(503).json({ error: 'not_ready', message: 'The database does not answer' });
        return;
      }
      if (problems.length > 0) {
        res.status(503).json({ error: 'not_ready', message: `The database cannot be used: ${problems.join('; ')}` });
        return;
      }
      res.json({ status: 'ready', database: db.kind });
    },
  }),
];
