import type { Request, RequestHandler } from 'express';
import type { Metrics } from './metrics.ts';
import { whenResponseDone } from '../http/response-done.ts';

/**
 * The route pattern a request matched (`/api/admin/users/:id`), never the raw path, so
 * the label set stays small whatever callers send; requests no route claimed share one label.
 */
export function routeLabel(req: Request): string {
  const route = (req as Request & { route?: { path?: unknown } }).route;
  if (route && typeof route.path === 'string') return `${req.baseUrl ?? ''}${route.path}`;
  return 'unmatched';
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
