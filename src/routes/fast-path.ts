import dc from 'node:diagnostics_channel';
import { IncomingMessage, ServerResponse } from 'node:http';
import type { ErrorRequestHandler, Express, NextFunction, Request, RequestHandler, Response } from 'express';
import { answerInternalError } from '../http/errors.ts';
import { leanJsonResponse } from '../http/fast-json.ts';
import type { AnyRoute } from './declare.ts';

/**
 * A step of a hot route's chain: middleware, or (four parameters, as Express tells them
 * apart) an error step, such as a hot client route's onCurrentClient (src/clients/guards.ts).
 */
type Step = RequestHandler | ErrorRequestHandler;

/** A hot route as the fast path serves it: its method and path, and every step in order. */
export interface FastRoute {
  route: Pick<AnyRoute, 'method' | 'path'>;
  /** The route's answer headers, the app-wide steps a request passes before any router, then the route's own chain. */
  steps: readonly Step[];
  /** Where the route's own steps begin in `steps` (after the app-wide ones). */
  routeStart: number;
  /**
   * For a path served by a handler Express mounts at a prefix (`app.use('/oidc', handler)`):
   * the prefix. The handler sees the request as Express's mount gives it: `baseUrl` the
   * prefix, `url` the rest, `originalUrl` the whole.
   */
  mount?: string;
}

/**
 * The hot server-to-server routes (declared `hot: true`: token issue and validation, and
 * OpenID Connect's token endpoints, src/app.ts) served in front of Express's router.
 *
 * Why by hand: for each request Express's router tests every app-wide layer and every route
 * of the sessionless router against the path, wraps `next` and restores request fields
 * between layers; on validation that dispatch was a third of the request's CPU time
 * (docs/performance.md). No library offers the same middleware contract without that walk,
 * so this runs the steps itself.
 *
 * What it runs is not a copy: `steps` are the very functions Express runs for the route, in
 * the same order (the route's answer headers, request id and log line, metric, security
 * headers, the JSON body checks, the text guard, then `chainOf(route)`: no-store, body schema,
 * client credentials, allow list, rate limit, handler); the request and response get
 * Express's prototypes, as Express gives them, and errors reach the same error handler. Two
 * pieces are leaner than Express's for the plain case and hand every other case to it
 * (src/http/fast-json.ts): the JSON body reader and `res.json`. So guards, error bodies,
 * headers, request id, log line and metric are those of the Express chain, which stays
 * mounted: a request written any other way (a query string, a trailing slash, another
 * case) is served by it.
 */
export function createFastPath(app: Express, routes: readonly FastRoute[], onError: ErrorRequestHandler): {
  serveHot(incoming: IncomingMessage, outgoing: ServerResponse): boolean;
  /** Server options whose requests and responses are born with the prototypes given here (see bornAs). */
  serverOptions: { IncomingMessage?: typeof IncomingMessage; ServerResponse?: typeof ServerResponse };
} {
  const byTarget = new Map<string, FastRoute & { method: string }>();
  // Express's response, with a direct res.json (src/http/fast-json.ts), as the prototype of a
  // subclass of Node's response: the responses of the service's own server are born with it.
  const BornResponse = subclassUnder(ServerResponse, app.response);
  const response = leanJsonResponse(app.response, app, BornResponse.prototype as Response);
  for (const r of routes) {
    if (byTarget.has(r.route.path)) throw new Error(`${r.route.path}: one hot route per path`);
    byTarget.set(r.route.path, { ...r, method: r.route.method.toUpperCase() });
  }

  /**
   * Serves the request if it is for a hot route written exactly as declared, and no tracer
   * listens to Express's router (then Express serves it, and publishes its steps); false
   * otherwise.
   */
  function serveHot(incoming: IncomingMessage, outgoing: ServerResponse): boolean {
    const hot = byTarget.get(incoming.url!);
    if (!hot || hot.method !== incoming.method || traced()) return false;
    // What Express's app.handle and router.handle do before the first layer
    // (node_modules/express/lib/application.js, node_modules/router/index.js).
    const req = incoming as Request;
    const res = outgoing as Response;
    if (app.enabled('x-powered-by')) res.setHeader('X-Powered-By', 'Express');
    req.res = res;
    res.req = req;
    // Born with these on the service's own server (serverOptions): then nothing changes here.
    if (Object.getPrototypeOf(req) !== app.request) Object.setPrototypeOf(req, app.request);
    if (Object.getPrototypeOf(res) !== response) Object.setPrototypeOf(res, response); // Express's, with a direct res.json (src/http/fast-json.ts)
    res.locals = Object.create(null);
    req.originalUrl = req.url;
    req.baseUrl = hot.mount ?? '';
    if (hot.mount) req.url = req.originalUrl.slice(hot.mount.length);
    req.params = {};
    runSteps(hot.steps, hot.routeStart, req, res, onError);
    return true;
  }

  return {
    serveHot,
    serverOptions: { IncomingMessage: bornAs(IncomingMessage, app.request), ServerResponse: BornResponse },
  };
}

/**
 * Express's router (router 2.3, node_modules/router/lib/tracing.js) publishes every step it
 * runs on this channel while anyone subscribes to it: tracing agents do, and they follow a
 * request's database calls through it. The fast path runs the steps without publishing, so
 * while there are subscribers the hot routes are left to Express.
 */
const routerChannel = dc.tracingChannel('express.router.request');
function traced(): boolean {
  const c = routerChannel;
  return c.start.hasSubscribers || c.end.hasSubscribers || c.asyncStart.hasSubscribers || c.asyncEnd.hasSubscribers || c.error.hasSubscribers;
}

/*
 * Why requests and responses are born with their prototypes: Express, and the fast path
 * after it, give every request and response another prototype (Object.setPrototypeOf), which
 * V8 pays for on every object and again at every property access after it (the object's
 * shape no longer matches what the code was optimised for); measured with `npm run bench`, it
 * was about a third of a validation's CPU time (docs/performance.md). An object already
 * holding the prototype it is given is left as it is, so a request born with `app.request`
 * and a response born with the fast path's response are never changed on a hot route; on
 * other routes Express still sets `app.response` on the response.
 *
 * Two ways, because V8 sizes an object's in-object fields from the constructor `new` was
 * called with. A subclass is sized from its base's constructors, so its instances keep fast
 * properties; a plain function that runs `base` on `this` (bornAs) is sized from its own
 * empty body, and a response, with its forty-odd fields, went to dictionary mode at birth:
 * every property access a hash lookup. But a subclass's instances get the subclass's own
 * prototype, so only the response, whose prototype is the fast path's own object, can be one;
 * the request must get Express's `app.request` itself, and keeps fast properties as a
 * function-born object (its fields are fewer). test/http/fast-path.test.ts checks both.
 */

/**
 * A subclass of `base` (for the server's `ServerResponse` option) whose prototype's parent is
 * `parent` instead of `base.prototype`: `new` runs `base`'s constructor, and its instances
 * are `base`'s, with the subclass's prototype, and through it `parent`, from birth.
 */
function subclassUnder<T extends abstract new (...args: never[]) => object>(base: T, parent: object): T {
  const Born = class extends (base as unknown as new (...args: unknown[]) => object) {};
  Object.setPrototypeOf(Born.prototype, parent);
  return Born as unknown as T;
}

/**
 * A constructor for Node's HTTP server (its `IncomingMessage` option) that builds what `base`
 * builds, with `prototype` itself as its prototype from birth; undefined when `base` is a
 * class, which cannot be called this way (Node 20 to 24 define it as a function). `base`
 * runs on the new object (`IncomingMessage.call(this, socket)`); Reflect.construct with a
 * new.target gave the same objects and, measured, cost more than the setPrototypeOf it saved.
 */
function bornAs<T extends abstract new (...args: never[]) => object>(base: T, prototype: object): T | undefined {
  if (Function.prototype.toString.call(base).startsWith('class')) return undefined;
  const construct = base as unknown as (this: object, a: unknown, b: unknown) => void;
  function Born(this: object, a: unknown, b: unknown): void {
    construct.call(this, a, b);
  }
  Born.prototype = prototype;
  return Born as unknown as T;
}

/**
 * Runs `steps` as Express's router runs the app's layers and then the route's: each step gets
 * `next`; a step that throws, passes an error to `next` or returns a rejected promise hands
 * the error to the route's next error step (exactly four parameters), and the steps between
 * are skipped, as steps of more than three parameters are while there is no error
 * (node_modules/router/lib/layer.js, handleRequest and handleError). An error raised before
 * the route (`routeStart`) never enters it: a route does not match with a pending error
 * (node_modules/router/index.js), so it ends in `onError`, as does an error no error step is
 * left for. `next('route')` and `next('router')` leave the route, as in Express, for the last
 * step (the 404 that follows). The error handler does not fail (src/http/errors.ts); should it
 * all the same, the answer is its JSON 500, or the connection is closed when the answer had
 * begun.
 */
function runSteps(steps: readonly Step[], routeStart: number, req: Request, res: Response, onError: ErrorRequestHandler): void {
  let i = 0;
  const fail = (err: unknown): void => {
    try {
      onError(err, req, res, () => {});
    } catch {
      answerInternalError(res);
    }
  };
  const settle = (ret: unknown) => {
    if (ret && typeof (ret as Promise<unknown>).then === 'function') {
      (ret as Promise<unknown>).then(undefined, (error: unknown) => next(error || new Error('Rejected promise')));
    }
  };
  const next: NextFunction = (err?: unknown) => {
    if (err === 'route' || err === 'router') {
      i = steps.length - 1;
      err = undefined;
    }
    if (err && i <= routeStart) return fail(err); // raised by an app-wide step: the route is not entered
    let step = steps[i++];
    // an error goes to the next error step; without one, the steps that handle errors are passed over
    while (step && (err ? step.length !== 4 : step.length > 3)) step = steps[i++];
    if (!step) return err ? fail(err) : undefined;
    try {
      settle(err ? (step as ErrorRequestHandler)(err, req, res, next) : (step as RequestHandler)(req, res, next));
    } catch (error) {
      next(error);
    }
  };
  next();
}

/** The step that enters a route: Express sets req.route when a route layer matches (read by the metric's label). */
export function enterRoute(route: AnyRoute): RequestHandler {
  const matched = { path: route.path, method: route.method };
  return (req, _res, next) => {
    (req as Request & { route: unknown }).route = matched;
    next();
  };
}
