import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import { pinoHttp } from 'pino-http';
import { safeError } from './logger.ts';

/** An incoming X-Request-Id we are willing to reuse: short, printable, no separators to inject. */
const SANE_REQUEST_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** Query strings mentioning any of these may carry a credential (e.g. the ?token= of the SSO redirect). */
const SENSITIVE_QUERY = /token|secret|passw|code|totp|session|auth|key|sig|jwt/i;

/** Paths polled by probes and scrapers: logged at debug so they do not drown the rest. */
const QUIET_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

/** The request id for this request: the caller's X-Request-Id when sane, else a new UUID. */
export function requestIdFor(req: IncomingMessage): string {
  const incoming = req.headers['x-request-id'];
  return typeof incoming === 'string' && SANE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
}

/**
 * The URL as it may be logged: the path, and the query string only when nothing in it looks
 * like a credential. The query is checked decoded, so a token nested in another parameter
 * (a return URL) is caught too.
 */
export function loggableUrl(url: string): string {
  const q = url.indexOf('?');
  if (q === -1) return url;
  const query = url.slice(q + 1);
  let decoded = query;
  try {
    decoded = decodeURIComponent(query.replace(/\+/g, ' '));
  } catch {
    return `${url.slice(0, q)}?[redacted]`; // undecodable: cannot vouch for it
  }
  return SENSITIVE_QUERY.test(decoded) ? `${url.slice(0, q)}?[redacted]` : url;
}

/**
 * Request logging (pino-http): one JSON line per finished request with id, method, loggable
 * URL, status and time. Only an allow-list of request headers is logged, never bodies, never
 * response headers (Location carries tokens, Set-Cookie sessions). Sets req.id, `req.log`,
 * and echoes the id in X-Request-Id.
 */
export function requestLogger(logger: Logger): RequestHandler {
  const middleware = pinoHttp({
    logger,
    genReqId(req: IncomingMessage, res: ServerResponse) {
      const id = requestIdFor(req);
      res.setHeader('X-Request-Id', id);
      return id;
    },
    wrapSerializers: false,
    serializers: {
      req(req: IncomingMessage & { id?: unknown; originalUrl?: string }) {
        return {
          id: req.id,
          method: req.method,
          url: loggableUrl(req.originalUrl ?? req.url ?? ''),
          remoteAddress: req.socket?.remoteAddress,
          userAgent: req.headers['user-agent'],
          contentType: req.headers['content-type'],
          contentLength: req.headers['content-length'],
        };
      },
      res(res: ServerResponse) {
        return { statusCode: res.statusCode };
      },
      err: safeError,
    },
    customLogLevel(req, res, err) {
      if (err || res.statusCode >= 500) return 'error';
      if (QUIET_PATHS.has((req.url ?? '').split('?')[0])) return 'debug';
      return 'info';
    },
    customSuccessMessage: (req, res) => (res.writableEnded ? `${req.method} ${res.statusCode}` : `${req.method} aborted before the answer`),
    customErrorMessage: (req, res) => `${req.method} ${res.statusCode} failed`,
  });
  return middleware as unknown as RequestHandler;
}
