import type { IncomingMessage } from 'node:http';
import type { Request, RequestHandler } from 'express';
import type { Metrics } from './metrics.ts';
import { whenResponseDone } from '../http/response-done.ts';

/** Where a handler that is no Express route (oidc-provider's mount) keeps the pattern it served. */
const SERVED_ROUTE = Symbol('route pattern served');

/** Names the route pattern `req` is served as, for a handler Express does not see as a route (one of a fixed set). */
export function markRoute(req: IncomingMessage, pattern: string | undefined): void {
  (req as IncomingMessage & { [SERVED_ROUTE]?: string })[SERVED_ROUTE] = pattern;
}

/**
 * The route pattern a request matched (`/api/admin/users/:id`), never the raw path, so
 * the label set stays small whatever callers send; requests no route claimed share one label.
 */
export function routeLabel(req: Request): string {
  const route = (req as Request & { route?: { path?: unknown } }).route;
  if (route && typeof route.path === 'string') return `${req.baseUrl ?? ''}${route.path}`;
  return (req as Request & { [SERVED_ROUTE]?: string })[SERVED_ROUTE] ?? 'unmatched';
}

/**
 * Times every request into the duration histogram and tracks the in-flight gauge. The
 * labelled series are looked up once per method, route and status (a handful) and kept,
 * instead of hashing the label set on every request.
 */
export function httpMetrics(metrics: Metrics): RequestHandler {
  const series = new Map<string, { observe(value: number): void }>();
  const seriesFor = (method: string, route: string, status: string) => {
    const key = `${method} ${status} ${route}`;
    let s = series.get(key);
    if (!s) {
      s = metrics.httpDuration.labels({ method, route, status });
      series.set(key, s);
    }
    return s;
  };
  return (req, res, next) => {
    const start = process.hrtime.bigint();
    metrics.httpInFlight.inc();
    whenResponseDone(req, res, () => {
      metrics.httpInFlight.dec();
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      seriesFor(req.method, routeLabel(req), String(res.statusCode)).observe(seconds);
    });
    next();
  };
}
