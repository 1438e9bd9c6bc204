import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ErrorRequestHandler, Express, NextFunction, Request, RequestHandler, Response } from 'express';
import { leanJsonResponse } from '../http/fast-json.ts';
import type { AnyRoute } from './declare.ts';

/** A step of a hot route's chain (a hot route has no error page of its own: src/routes/mount.ts). */
type Step = RequestHandler;

/** A hot route as the fast path serves it: its method and path, and every step in order. */
export interface FastRoute {
  route: AnyRoute;
  /** The app-wide steps a request passes before any router, then the route's own chain. */
  steps: readonly Step[];
}

/**
 * The hot server-to-server routes (declared `hot: true`: token issue and validation) served
 * in front of Express's router.
 *
 * Why by hand: for each request Express's router tests every app-wide layer and every route
 * of the sessionless router against the path, wraps `next` and restores request fields
 * between layers; on validation that dispatch was a third of the request's CPU time
 * (docs/performance.md). No library offers the same middleware contract without that walk,
 * so this runs the steps itself.
 *
 * What it runs is not a copy: `steps` are the very functions Express runs for the route, in
 * the same order (request id and log line, metric, security headers, the JSON body checks,
 * the text guard, then `chainOf(route)`: no-store, the route's own headers, body schema,
 * client credentials, allow list, rate limit, handler); the request and response get
 * Express's prototypes, as Express gives them, and errors reach the same error handler. Two
 * pieces are leaner than Express's for the plain case and hand every other case to it
 * (src/http/fast-json.ts): the JSON body reader and `res.json`. So guards, error bodies,
 * headers, request id, log line and metric are those of the Express chain, which stays
 * mounted: a request written any other way (a query string, a trailing slash, another
 * case) is served by it.
 */
export function createFastPath(app: Express, routes: readonly FastRoute[], onError: ErrorRequestHandler) {
  const byTarget = new Map<string, FastRoute & { method: string }>();
  const response = leanJsonResponse(app.response, app);
  for (const r of routes) {
    if (byTarget.has(r.route.path)) throw new Error(`${r.route.path}: one hot route per path`);
    byTarget.set(r.route.path, { ...r, method: r.route.method.toUpperCase() });
  }

  /** Serves the request if it is for a hot route written exactly as declared; false otherwise. */
  return function serveHot(incoming: IncomingMessage, outgoing: ServerResponse): boolean {
    const hot = byTarget.get(incoming.url!);
    if (!hot || hot.method !== incoming.method) return false;
    // What Express's app.handle and router.handle do before the first layer
    // (node_modules/express/lib/application.js, node_modules/router/index.js).
    const req = incoming as Request;
    const res = outgoing as Response;
    if (app.enabled('x-powered-by')) res.setHeader('X-Powered-By', 'Express');
    req.res = res;
    res.req = req;
    Object.setPrototypeOf(req, app.request);
    Object.setPrototypeOf(res, response); // Express's, with a direct res.json (src/http/fast-json.ts)
    res.locals = Object.create(null);
    req.baseUrl = '';
    req.originalUrl = req.url;
    req.params = {};
    runSteps(hot.steps, req, res, onError);
    return true;
  };
}

/**
 * Runs `steps` as Express's router runs a layer's handler: each step gets `next`; a step
 * that throws, passes an error to `next` or returns a rejected promise ends the chain in
 * `onError` (node_modules/router/lib/layer.js, handleRequest). `next('route')` and
 * `next('router')` leave the route, as in Express, for the last step (the 404 that follows).
 * Should the error handler itself fail, the answer is a bare 500, or the connection is
 * closed when the answer had begun (Express's finalhandler does the same).
 */
function runSteps(steps: readonly Step[], req: Request, res: Response, onError: ErrorRequestHandler): void {
  let i = 0;
  const fail = (err: unknown): void => {
    try {
      onError(err, req, res, () => {});
    } catch {
      if (res.headersSent) res.destroy();
      else {
        res.statusCode = 500;
        res.end();
      }
    }
  };
  const next: NextFunction = (err?: unknown) => {
    if (err === 'route' || err === 'router') {
      i = steps.length - 1;
      err = undefined;
    }
    if (err) return fail(err);
    const step = steps[i++];
    if (!step) return;
    try {
      const ret = step(req, res, next) as unknown;
      if (ret && typeof (ret as Promise<unknown>).then === 'function') {
        (ret as Promise<unknown>).then(undefined, (error: unknown) => next(error || new Error('Rejected promise')));
      }
    } catch (error) {
      next(error);
    }
  };
  next();
}

/** The step that enters a route: Express sets req.route when a route layer matches (read by the metric's label). */
export function enterRoute(route: AnyRoute): Step {
  const matched = { path: route.path, method: route.method };
  return (req, _res, next) => {
    (req as Request & { route: unknown }).route = matched;
    next();
  };
}
