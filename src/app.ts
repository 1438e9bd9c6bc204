import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import express, { type Express, type RequestHandler } from 'express';
import type { RouteServices } from './routes/declare.ts';
import { MAX_PASSWORD_BYTES } from './auth/passwords.ts';
import { fastJsonBody } from './http/fast-json.ts';
import { apiHeaders, headersByKind, pageHeaders } from './http/security-headers.ts';
import { authenticateUser } from './auth/guards.ts';
import { trustProxySetting } from './http/client-ip.ts';
import { answerUnparsedRequests } from './http/client-errors.ts';
import { apiNotFound, errorHandler, pageNotFound } from './http/errors.ts';
import { saveSessionBeforeRedirect, sessionMiddleware, sessionSecrets } from './http/session.ts';
import { useCsrfKeys } from './pages/csrf.ts';
import { OIDC_HOT_PATHS, OIDC_PREFIX, OIDC_SESSIONLESS_PATHS, providerRoute } from './oidc/provider.ts';
import { oidcViews } from './pages/oidc-interaction.ts';
import { rejectUnstorableText } from './http/text-guard.ts';
import { requireJsonBody } from './http/validate.ts';
import { requestLogger } from './logging/request-log.ts';
import { httpMetrics, markRoute } from './metrics/http.ts';
import { ROUTES } from './routes/index.ts';
import { createFastPath } from './routes/fast-path.ts';
import { mountRoutes } from './routes/mount.ts';

export const VIEWS_DIR = fileURLToPath(new URL('../views/', import.meta.url));
export const PUBLIC_DIR = fileURLToPath(new URL('../public/', import.meta.url));
/** The browser half of SimpleWebAuthn, served from the package's own bundle (no CDN: the pages' CSP allows scripts from here only). */
export const WEBAUTHN_BROWSER_DIR = path.join(path.dirname(fileURLToPath(import.meta.resolve('@simplewebauthn/browser'))), '..', 'dist', 'bundle');

/** The largest JSON body accepted (16 KiB): a larger one is 413. */
const JSON_BODY_LIMIT = 16 * 1024;

/** Express's own dispatch of a request (untyped in @types/express). */
type ExpressHandle = (req: IncomingMessage, res: ServerResponse, callback?: (err?: unknown) => void) => void;

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
  // the forms that set a password say the policy the services check (src/auth/password-policy.ts)
  app.locals.passwordPolicy = { minLength: config.PASSWORD_MIN_LENGTH, maxBytes: MAX_PASSWORD_BYTES };
  // the forms of a browser without a session carry a token signed with the session secrets (src/pages/csrf.ts)
  useCsrfKeys(app, sessionSecrets(config), { secure: config.NODE_ENV === 'production' });
  // The app-wide steps every request passes before the routers, named so the fast path of
  // the hot routes (below) runs these very functions.
  const production = config.NODE_ENV === 'production';
  const logRequest = requestLogger(logger); // the first app-wide step: every answer, errors included, has a request id and a log line
  const timeRequest = httpMetrics(deps.deps.metrics);
  const securityHeaders = headersByKind(apiHeaders({ production }), pageHeaders({ production })); // API: a short fixed set; pages: CSP without inline script, nosniff, no framing
  const jsonBody = express.json({ limit: JSON_BODY_LIMIT, strict: false, type: ['application/json', 'application/*+json'] });
  const declared = mountRoutes(ROUTES, deps);

  // A route's own answer headers (the legacy route's Deprecation) before anything else: then
  // whatever step answers, the JSON checks below included, they are on the answer.
  for (const { method, path, step } of declared.headers) app[method](path, step);
  app.use(logRequest);
  app.use(timeRequest);
  app.use(securityHeaders);
  app.use('/assets/vendor/simplewebauthn', express.static(WEBAUTHN_BROWSER_DIR, { index: false, maxAge: '1h' }));
  app.use('/assets', express.static(PUBLIC_DIR, { index: false, maxAge: '1h' })); // before sessions: assets need none

  app.use('/api', requireJsonBody);
  app.use(jsonBody);
  app.use(rejectUnstorableText); // NUL and lone surrogates are bad input, not database errors

  // Machine-to-machine routes first: they carry no cookies, so the hot paths (token issue and
  // validation) never load a session or look for a signed-in user.
  app.use(declared.sessionless);
  // the same for OpenID Connect's machine-to-machine endpoints (token, introspection, ...)
  const serveOidc: RequestHandler = (req, res) => {
    markRoute(req, providerRoute(req.path));
    return deps.oidc.handle(req, res);
  };
  app.use(OIDC_PREFIX, (req, res, next) => (OIDC_SESSIONLESS_PATHS.has(req.path) ? serveOidc(req, res, next) : next()));

  app.use(sessionMiddleware(config, db)); // sessions in the database: every instance sees them
  app.use(saveSessionBeforeRedirect); // a redirect leaves only once what this request stored is saved
  app.use(authenticateUser(deps)); // res.locals.user from the session or a bearer access token; never answers

  app.use(declared.withSession);

  // OpenID Connect (docs/openid-connect.md): oidc-provider under /oidc, after the session
  // middleware (its sign-in check reads the browser's session here); the issuer is PUBLIC_URL,
  // so its discovery document is also served where the issuer says, at the root (src/oidc/routes.ts).
  deps.oidc.attachViews(oidcViews(deps.auth), sessionSecrets(config));
  deps.oidc.useFailureLimit(deps.limiters.clientAuthFailures); // wrong client secrets at the token endpoints count as at /api/sso
  app.use(OIDC_PREFIX, serveOidc);

  app.use('/api', apiNotFound);
  app.use(pageNotFound);
  const handleError = errorHandler(logger);
  app.use(handleError);

  // Token issue and validation, and OpenID Connect's token endpoints, skip Express's router
  // walk: the same steps, run by the fast path (src/routes/fast-path.ts); every other request,
  // and these written any other way, go through Express.
  const fastJson = fastJsonBody(jsonBody, JSON_BODY_LIMIT);
  // the provider's: the app-wide steps Express runs before its mount (no /api JSON rule), then
  // the provider, which sees the request as mounted at OIDC_PREFIX
  const beforeOidc = [logRequest, timeRequest, securityHeaders, fastJson, rejectUnstorableText];
  const oidcHot = [...OIDC_HOT_PATHS].map((path) => ({
    route: { method: 'post' as const, path: `${OIDC_PREFIX}${path}` },
    steps: [...beforeOidc, serveOidc],
    routeStart: beforeOidc.length,
    mount: OIDC_PREFIX,
  }));
  const { serveHot, serverOptions } = createFastPath(app, [
    ...declared.hot([logRequest, timeRequest, securityHeaders, requireJsonBody, fastJson, rejectUnstorableText]),
    ...oidcHot,
  ], handleError);
  // app(req, res) calls app.handle (node_modules/express/lib/express.js), whoever serves it:
  // http.createServer(app), app.listen, supertest. A mounted sub-app (callback set) is not.
  const dispatch = app as Express & { handle: ExpressHandle };
  const handle = dispatch.handle.bind(app);
  dispatch.handle = (req, res, callback) => {
    if (callback || !serveHot(req, res)) handle(req, res, callback);
  };
  SERVER_OPTIONS.set(app, serverOptions);
  return app;
}

const SERVER_OPTIONS = new WeakMap<Express, http.ServerOptions>();

/**
 * The HTTP server for an app made by createApp: its requests and responses are born with the
 * prototypes Express and the fast path give them (src/routes/fast-path.ts, bornAs), which
 * makes token issue and validation markedly cheaper. `http.createServer(app)` (supertest)
 * serves the same answers. Requests Node's parser refuses are answered in JSON too.
 */
export function createServer(app: Express): http.Server {
  const server = http.createServer(SERVER_OPTIONS.get(app) ?? {}, app);
  answerUnparsedRequests(server);
  return server;
}
