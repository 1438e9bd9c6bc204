import { Router, type RequestHandler } from 'express';
import { requireAdminPage, adminFormBody } from '../admin/panel-common.ts';
import { authenticateClient, onCurrentClient, requireAllowedIp } from '../clients/guards.ts';
import { requireAdmin, requireUser } from '../auth/guards.ts';
import { apiNotFound, AppError } from '../http/errors.ts';
import { noStore } from '../http/no-store.ts';
import { formBody } from '../http/text-guard.ts';
import { validateBody, validateQuery } from '../http/validate.ts';
import { requireCsrf } from '../pages/csrf.ts';
import { requirePageUser } from '../pages/dashboard.ts';
import type { AnyRoute, RouteServices } from './declare.ts';
import { enterRoute, type FastRoute } from './fast-path.ts';

const pageForm = formBody({ parameterLimit: 20 });

const GUARDS: Partial<Record<AnyRoute['access'], RequestHandler>> = {
  user: requireUser,
  admin: requireAdmin,
  'page-user': requirePageUser,
  'page-admin': requireAdminPage,
};

/** A path parameter the route's schema refuses: 400 invalid_id, before the body is looked at. */
function checkParams(schema: NonNullable<AnyRoute['params']>): RequestHandler {
  return (req, res, next) => {
    const parsed = schema.safeParse(req.params);
    if (!parsed.success) throw new AppError(400, 'invalid_id', 'The id must be a positive integer');
    res.locals.params = parsed.data;
    next();
  };
}

/**
 * Sets a route's own answer headers (`headers` of its declaration), then goes on. Mounted as
 * a route of its own, so Express matches it exactly as it matches the route; but Express then
 * marks the request with that route (req.route), which the metric reads as the route entered
 * (src/metrics/http.ts): the mark is taken off, so a request refused before the route is
 * entered counts as unmatched, as on every other route and on the fast path.
 */
function answerHeaders(headers: Record<string, string>): RequestHandler {
  const pairs = Object.entries(headers);
  return (req, res, next) => {
    for (const [name, value] of pairs) res.setHeader(name, value);
    const marked = req as { route?: unknown };
    if (marked.route !== undefined) marked.route = undefined; // (the fast path has none to take off)
    next();
  };
}

/** Whether a route is served before sessions are loaded. */
export function isSessionless(route: AnyRoute): boolean {
  return route.sessionless ?? (route.access === 'client' || route.access === 'client+ip');
}

/**
 * The middleware chain a declaration stands for, in one fixed order:
 * no-store; the form parser; the route's own steps; then for client routes the body (it holds
 * the credentials), the client, its allow list and the limit (keyed by the proven client);
 * for the others the limit, the caller, the CSRF token, the path, the body and the query;
 * the handler; for a hot client route, the decision again on the client's current record
 * (src/clients/guards.ts, onCurrentClient); the route's error page.
 */
export function chainOf(route: AnyRoute, s: RouteServices, routes: readonly AnyRoute[]): Array<RequestHandler | ReturnType<NonNullable<AnyRoute['onError']>>> {
  const chain: Array<RequestHandler | ReturnType<NonNullable<AnyRoute['onError']>>> = [];
  if (!route.cacheable) chain.push(noStore);
  if (route.bodyType === 'form') chain.push(...(route.access === 'page-admin' ? adminFormBody : pageForm));
  chain.push(...(route.before?.(s) ?? []));
  const limit = route.limit === 'none' ? [] : [s.limiters[route.limit]];
  const byClient = route.access === 'client' || route.access === 'client+ip';
  if (byClient) {
    if (!route.body) throw new Error(`${route.method} ${route.path}: client credentials travel in the body; declare one`);
    // a hot route may decide on a client record kept in memory: onCurrentClient (below) makes it good
    chain.push(validateBody(route.body), authenticateClient(s.clients, s.limiters.clientAuthFailures, { kept: route.hot }));
    if (route.access === 'client+ip') chain.push(requireAllowedIp);
    chain.push(...limit);
  } else {
    chain.push(...limit);
    const guard = GUARDS[route.access];
    if (guard) {
      // where a page's guard sends a browser without its session: the page the form is on
      if (route.method === 'post') chain.push(signInReturnsTo(formPageOf(route, routes)));
      chain.push(guard, callerEstablished);
    }
    if (route.bodyType === 'form' && route.method === 'post') chain.push(requireCsrf);
    if (route.params) chain.push(checkParams(route.params));
    if (route.body) chain.push(validateBody(route.body));
  }
  if (route.query && !route.queryCheckedByHandler) chain.push(validateQuery(route.query));
  const handler = route.handle(s, routes);
  const run: RequestHandler = (req, res, next) =>
    handler({
      req, res, next,
      body: res.locals.input, query: res.locals.query, params: res.locals.params ?? req.params,
      client: res.locals.client, user: res.locals.user,
    }) as Promise<void>;
  chain.push(run);
  if (byClient && route.hot) chain.push(onCurrentClient(s.clients, { checkIp: route.access === 'client+ip', rest: [...limit, run], handler: run }));
  if (route.onError) chain.push(GUARDS[route.access] && !byClient ? onlyForEstablishedCaller(route.onError(s)) : route.onError(s));
  return chain;
}

/**
 * Marks the request as past its route's guard: a signed-in user (an administrator) is in
 * `res.locals.user`. The route's error page reads it (onlyForEstablishedCaller).
 */
const callerEstablished: RequestHandler = (_req, res, next) => {
  res.locals.callerEstablished = true;
  next();
};

/**
 * A route's error page (a form shown again with its problem) for a route behind a guard runs
 * only once the guard has established the caller: what was refused before it (the form
 * parser's 400 or 413, a NUL in a field, the limit's 429) goes to the app's error page, which
 * needs nobody signed in. Those pages render the signed-in user's own page, and without one
 * they failed (a TypeError, answered 500): a scanner's tampered `_csrf` with a NUL in it, sent
 * without the session, reached them.
 */
function onlyForEstablishedCaller(page: ReturnType<NonNullable<AnyRoute['onError']>>): ReturnType<NonNullable<AnyRoute['onError']>> {
  return (err, req, res, next) => (res.locals.callerEstablished === true ? page(err, req, res, next) : next(err));
}

/**
 * The page a form is on, by its declaration: the longest GET route of the same access whose
 * path begins the form's path (POST /admin/users/:id/unlock is on GET /admin/users/:id), or
 * undefined when there is none.
 */
export function formPageOf(form: AnyRoute, routes: readonly AnyRoute[]): string | undefined {
  const segments = form.path.split('/');
  let best: string | undefined;
  for (const r of routes) {
    if (r.method !== 'get' || r.access !== form.access) continue;
    const own = r.path.split('/');
    if (own.length > segments.length || own.some((part, i) => part !== segments[i])) continue;
    if (!best || own.length > best.split('/').length) best = r.path;
  }
  return best;
}

/** A path parameter that can stand in a sign-in's `next` as it is (ids, client ids). */
const PLAIN_PARAM = /^[A-Za-z0-9._~-]{1,100}$/;

/**
 * Tells the route's guard where a sign-in should return to (`res.locals.signInNext`) when
 * the browser turns out not to be signed in (a session that ended while the form was open):
 * the form's page, with the request's path parameters, so the sign-in comes back to it.
 */
function signInReturnsTo(page: string | undefined): RequestHandler {
  return (req, res, next) => {
    if (page) {
      let plain = true;
      const path = page.replace(/:(\w+)/g, (_m, name: string) => {
        const value = String((req.params as Record<string, unknown>)[name] ?? '');
        if (!PLAIN_PARAM.test(value)) plain = false;
        return value;
      });
      if (plain) res.locals.signInNext = path;
    }
    next();
  };
}

/** What the app mounts, generated from the declarations. */
export interface MountedRoutes {
  /**
   * The answer headers of the routes that declare them, to mount in front of every app-wide
   * step (src/app.ts), so that an answer the body parser or the JSON check gives carries them
   * too: the route's method and path, as Express matches them, and the step that sets them.
   */
  headers: Array<{ method: AnyRoute['method']; path: string; step: RequestHandler }>;
  /** The routes served before the session middleware. */
  sessionless: Router;
  /** The rest. */
  withSession: Router;
  /**
   * The hot routes for the fast path (src/routes/fast-path.ts), each with the very chain
   * instances its router mounts: its answer headers (as `headers`), `appSteps` (what Express
   * runs before its routers), the route entered, its chain, and what Express would run should
   * the chain fall through (404).
   */
  hot(appSteps: readonly RequestHandler[]): FastRoute[];
}

/** The routers the app mounts, generated from the declarations, and the hot routes' chains. */
export function mountRoutes(routes: readonly AnyRoute[], s: RouteServices): MountedRoutes {
  const sessionless = Router();
  const withSession = Router();
  const headers: MountedRoutes['headers'] = [];
  const hot: Array<{ route: AnyRoute; ownHeaders: RequestHandler[]; chain: RequestHandler[] }> = [];
  for (const route of routes) {
    if (route.when && !route.when(s)) continue;
    const chain = chainOf(route, s, routes);
    (isSessionless(route) ? sessionless : withSession)[route.method](route.path, ...chain);
    const ownHeaders = route.headers ? [answerHeaders(route.headers)] : [];
    for (const step of ownHeaders) headers.push({ method: route.method, path: route.path, step });
    if (route.hot) {
      if (!isSessionless(route) || route.onError) throw new Error(`${route.method} ${route.path}: a hot route is served before sessions and has no error page`);
      hot.push({ route, ownHeaders, chain: chain as RequestHandler[] });
    }
  }
  return {
    headers,
    sessionless,
    withSession,
    hot: (appSteps) => hot.map(({ route, ownHeaders, chain }) => ({
      route,
      steps: [...ownHeaders, ...appSteps, enterRoute(route), ...chain, apiNotFound],
      routeStart: ownHeaders.length + appSteps.length,
    })),
  };
}
