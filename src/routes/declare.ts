import type { ErrorRequestHandler, NextFunction, Request, RequestHandler, Response } from 'express';
import type { z } from 'zod';
import type { ClientRecord } from '../clients/client.ts';
import type { Services } from '../deps.ts';
import type { RateLimiters } from '../http/rate-limit.ts';
import type { UserRecord } from '../users/user.ts';

/**
 * Who may call a route. The router mounts the matching guard; the API reference states it.
 * - `public`: nobody in particular.
 * - `client` / `client+ip`: client_id + client_secret in the JSON body (and, with `+ip`, the
 *   caller's address on the client's allow list).
 * - `user` / `admin`: a session cookie or a bearer access token (admin: role admin).
 * - `page` / `page-user` / `page-admin`: a server-rendered page in a browser session; POST
 *   forms carry the CSRF token. Without the session a page-user or page-admin route
 *   redirects (303) to /login.
 */
export type Access = 'public' | 'client' | 'client+ip' | 'user' | 'admin' | 'page' | 'page-user' | 'page-admin';

/** The rate limits a route can be under (src/http/rate-limit.ts), or explicitly none. */
export type LimitName = keyof Omit<RateLimiters, 'close' | 'clientAuthFailures'>;

/** What a route's handler factory is given: the wired services and the rate limiters. */
export interface RouteServices extends Services {
  limiters: RateLimiters;
}

/** One documented answer. */
export interface DocResponse {
  description: string;
  /** JSON body schema; omitted for empty or non-JSON answers. */
  schema?: z.ZodType;
  /** Media type when the answer is not JSON (text/html, text/csv, ...). */
  mediaType?: string;
  /** More media types the same status may be sent as, e.g. JSON to `Accept: application/json`. */
  alternatives?: Array<{ mediaType: string; schema?: z.ZodType }>;
  /** Response headers worth naming (Location, Retry-After, Deprecation). */
  headers?: Record<string, string>;
  example?: unknown;
}

/** Who is calling, as the guard established it. */
type Principal<A extends Access> = A extends 'client' | 'client+ip'
  ? { client: ClientRecord; user?: undefined }
  : A extends 'user' | 'admin' | 'page-user' | 'page-admin'
    ? { user: UserRecord; client?: undefined }
    : { user?: UserRecord; client?: undefined };

/** What a handler receives: the request, its validated parts, and the proven caller. */
export type RouteContext<A extends Access, B, Q, P> = {
  req: Request;
  res: Response;
  next: NextFunction;
  body: B;
  query: Q;
  params: P;
} & Principal<A>;

export type RouteHandler<A extends Access, B, Q, P> = (ctx: RouteContext<A, B, Q, P>) => unknown;

/**
 * One endpoint, declared once: method, path, guards, schemas, documentation and handler.
 * The Express routers (src/routes/mount.ts) and the OpenAPI document (src/openapi/) are
 * both generated from these, so what is documented is what is mounted.
 */
export interface Route<A extends Access = Access, B = unknown, Q = unknown, P = Record<string, string>> {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** Express syntax: `/api/webhooks/:id`. */
  path: string;
  access: A;
  /** The rate limit the route is under; `none` is a decision, stated here and in the reference. */
  limit: LimitName | 'none';
  /** The request body schema (JSON, or with `bodyType: 'form'` an HTML form). */
  body?: z.ZodType<B>;
  bodyType?: 'json' | 'form';
  /** The body may be left out (every field is optional). */
  bodyOptional?: boolean;
  query?: z.ZodType<Q>;
  /**
   * The handler reads the query itself (to show the page with the problem, not an error page):
   * `query` then only documents it.
   */
  queryCheckedByHandler?: boolean;
  /** Path parameters; a value the schema refuses is 400 invalid_id before anything else runs. */
  params?: z.ZodType<P>;
  /** Answers may be cached (health, metrics, the reference); every other answer is no-store. */
  cacheable?: boolean;
  /**
   * Served before the session middleware: no cookie is read, no session loaded. Routes
   * under client credentials always are (they are the hot paths).
   */
  sessionless?: boolean;
  /**
   * A hot server-to-server route: also served by the fast path in front of Express's router
   * (src/routes/fast-path.ts), with the same chain.
   */
  hot?: boolean;
  /** Served only when the condition on the services holds (the demo pages outside production). */
  when?: (s: RouteServices) => boolean;
  /**
   * Headers on every answer of the route, whichever step gives it (the legacy route's
   * Deprecation and Link): set before the app-wide steps, whose refusals (malformed JSON,
   * another content type, a body too large, unstorable text) come before the route's own
   * steps, by Express and the fast path alike (src/routes/mount.ts, answerHeaders).
   */
  headers?: Record<string, string>;
  /** Extra steps after the body is parsed and before the guards (the sign-in page's target client). */
  before?: (s: RouteServices) => RequestHandler[];
  /** Builds the handler once, from the services. */
  handle: (s: RouteServices, routes: readonly AnyRoute[]) => RouteHandler<A, B, Q, P>;
  /** Turns the route's own errors into a page (forms re-rendered with the problem). */
  onError?: (s: RouteServices) => ErrorRequestHandler;

  // the API reference
  tag: string;
  summary: string;
  description?: string;
  /** An example body; the reference test checks it validates against `body`. */
  example?: unknown;
  responses: Record<number, DocResponse>;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a list holds routes of every shape
export type AnyRoute = Route<Access, any, any, any>;

/** Declares a route; the generic parameters come from the schemas, so the handler's context is typed. */
export function route<A extends Access, B = undefined, Q = undefined, P = Record<string, string>>(declaration: Route<A, B, Q, P>): AnyRoute {
  return declaration as AnyRoute;
}

/**
 * Express handlers built together from the services (pages render with res.render and hand
 * form errors on with next): `factory` runs once per services object, and each route picks
 * its handler from the result.
 */
export function handlersFrom<S>(factory: (s: RouteServices) => S) {
  const built = new WeakMap<RouteServices, S>();
  const of = (s: RouteServices): S => {
    if (!built.has(s)) built.set(s, factory(s));
    return built.get(s) as S;
  };
  return {
    handle: (pick: (handlers: S) => RequestHandler) => (s: RouteServices) => {
      const handler = pick(of(s));
      return ({ req, res, next }: { req: Request; res: Response; next: NextFunction }) => handler(req, res, next);
    },
    onError: (pick: (handlers: S) => ErrorRequestHandler) => (s: RouteServices) => pick(of(s)),
  };
}
