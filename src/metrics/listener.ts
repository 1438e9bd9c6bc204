import { createHash, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Metrics } from './metrics.ts';

/**
 * The metrics listener's requests: `GET /metrics` (and HEAD) in the Prometheus text format,
 * with METRICS_TOKEN set only under `Authorization: Bearer <token>` (401 otherwise); every
 * other path 404. A plain Node handler, not the Express app: nothing of the public service
 * (sessions, pages, its routes) is reachable on this port, and the public port has no
 * /metrics. Metrics tell real accounts from unknown names (a lockout moves
 * auth_lockouts_total and the user.locked delivery counters), so they are for the operator's
 * scraper only (docs/metrics.md).
 */
export function metricsHandler(metrics: Metrics, token?: string): http.RequestListener {
  // compared as digests: equal lengths, so timingSafeEqual never throws and the length leaks nothing
  const wanted = token === undefined ? undefined : createHash('sha256').update(token).digest();
  const authorized = (header: string | undefined) => {
    if (!wanted) return true;
    const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header ?? '');
    return match !== null && timingSafeEqual(createHash('sha256').update(match[1]!).digest(), wanted);
  };
  const answer = (res: http.ServerResponse, status: number, text: string, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store', ...headers });
    res.end(text);
  };
  return (req, res) => {
    const path = (req.url ?? '/').split(/[?#]/, 1)[0]!;
    req.resume(); // a body, which nothing here reads, must not hold the connection
    if (!/^\/metrics\/?$/i.test(path)) return answer(res, 404, 'Not Found\n');
    if (req.method !== 'GET' && req.method !== 'HEAD') return answer(res, 405, 'Method Not Allowed\n', { Allow: 'GET, HEAD' });
    if (!authorized(req.headers.authorization)) return answer(res, 401, 'Unauthorized\n', { 'WWW-Authenticate': 'Bearer realm="metrics"' });
    metrics.registry.metrics().then((body) => {
      res.writeHead(200, { 'Content-Type': metrics.registry.contentType, 'Cache-Control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : body);
    }, () => answer(res, 500, 'Metrics could not be collected\n'));
  };
}

/** A metrics listener that listens: its base URL and its stop. */
export interface MetricsListener {
  url: string;
  close(): Promise<void>;
}

/**
 * Listens on METRICS_PORT at METRICS_HOST with `handler`, or does nothing (undefined) when
 * METRICS_PORT is unset. Started and stopped with the service (src/service.ts, startService).
 */
export async function startMetricsListener(
  config: Pick<Config, 'METRICS_PORT' | 'METRICS_HOST' | 'METRICS_TOKEN'>, handler: http.RequestListener, logger: Logger,
): Promise<MetricsListener | undefined> {
  if (config.METRICS_PORT === undefined) return undefined;
  const server = http.createServer(handler);
  server.keepAliveTimeout = 65_000; // longer than a scraper's idle connection
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.METRICS_PORT, config.METRICS_HOST, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = config.METRICS_HOST === '0.0.0.0' || config.METRICS_HOST === '::' ? '127.0.0.1' : config.METRICS_HOST;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const loopback = /^(127\.|::1$|localhost$)/i.test(config.METRICS_HOST);
  if (!loopback && !config.METRICS_TOKEN) {
    logger.warn({ host: config.METRICS_HOST }, 'metrics are served beyond loopback without METRICS_TOKEN: keep that address off the public network');
  }
  logger.info({ url: `${url}/metrics`, token: Boolean(config.METRICS_TOKEN) }, 'metrics listening');
  return {
    url,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections(); // a scrape is short: nothing worth draining
    }),
  };
}
