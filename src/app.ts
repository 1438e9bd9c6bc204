import { fileURLToPath } from 'node:url';
import express, { type Express } from 'express';
import type { RouteServices } from './routes/declare.ts';
import { apiHeaders, headersByKind } from './http/api-headers.ts';
import { authenticateUser } from './http/auth-guards.ts';
import { trustProxySetting } from './http/client-ip.ts';
import { apiNotFound, errorHandler, pageNotFound } from './http/errors.ts';
import { saveSessionBeforeRedirect, sessionMiddleware } from './http/session.ts';
import { rejectUnstorableText } from './http/text-guard.ts';
import { requireJsonBody } from './http/validate.ts';
import { requestLogger } from './logging/request-log.ts';
import { httpMetrics } from './metrics/http.ts';
import { ROUTES } from './routes/index.ts';
import { mountRoutes } from './routes/mount.ts';
import { securityHeaders } from './pages/security.ts';

export const VIEWS_DIR = fileURLToPath(new URL('../views/', import.meta.url));
export const PUBLIC_DIR = fileURLToPath(new URL('../public/', import.meta.url));

/** Everything createApp needs: the wired services and the rate limiters. */
export type AppDeps = RouteServices;

/** Builds the Express application: global middleware, then every router in one list. */
export function createApp(deps: AppDeps): Express {
  const { config, logger, db } = deps.deps;
  const app = express();
  app.disable('x-powered-by');
  // No ETags on dynamic answers: Express would hash every body for one, and nothing here is
  // worth revalidating (credentials and pages are no-store; /assets has its own).
  app.set('etag', false);
  app.set('trust proxy', trustProxySetting(config.TRUST_PROXY));
  app.set('view engine', 'ejs');
  app.set('views', VIEWS_DIR);
  // every view reads the organisation's name and logo (checked at config load: local or data: only)
  app.locals.brand = { name: config.BRAND_NAME, logoUrl: config.BRAND_LOGO_URL ?? null };
  app.use(requestLogger(logger)); // first: every answer, errors included, has a request id and a log line
  app.use(httpMetrics(deps.deps.metrics));
  const production = config.NODE_ENV === 'production';
  app.use(headersByKind(apiHeaders({ production }), securityHeaders({ production }))); // API: a short fixed set; pages: CSP without inline script, nosniff, no framing
  app.use('/assets', express.static(PUBLIC_DIR, { index: false, maxAge: '1h' })); // before sessions: assets need none

  app.use('/api', requireJsonBody);
  app.use(express.json({ limit: '16kb', strict: false, type: ['application/json', 'application/*+json'] }));
  app.use(rejectUnstorableText); // NUL and lone surrogates are bad input, not database errors

  // Machine-to-machine routes first: they carry no cookies, so the hot paths (token issue and
  // validation) never load a session or look for a signed-in user.
  const declared = mountRoutes(ROUTES, deps);
  app.use(declared.sessionless);

  app.use(sessionMiddleware(config, db)); // sessions in the database: every instance sees them
  app.use(saveSessionBeforeRedirect); // a redirect leaves only once what this request stored is saved
  app.use(authenticateUser(deps)); // res.locals.user from the session or a bearer access token; never answers

  app.use(declared.withSession);

  app.use('/api', apiNotFound);
  app.use(pageNotFound);
  app.use(errorHandler(logger));
  return app;
}
