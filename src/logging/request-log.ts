import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import { isProbePath } from '../http/api-paths.ts';
import { whenResponseDone } from '../http/response-done.ts';
import { quietly } from './logger.ts';

/** An incoming X-Request-Id we are willing to reuse: short, printable, no separators to inject. */
const SANE_REQUEST_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** Query strings mentioning any of these may carry a credential (e.g. the ?token= of the SSO redirect). */
const SENSITIVE_QUERY = /token|secret|passw|code|totp|session|auth|key|sig|jwt/i;

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
  let decoded: string;
  try {
    decoded = decodeURIComponent(query.replace(/\+/g, ' '));
  } catch {
    return `${url.slice(0, q)}?[redacted]`; // undecodable: cannot vouch for it
  }
  return SENSITIVE_QUERY.test(decoded) ? `${url.slice(0, q)}?[redacted]` : url;
}

type LoggedRequest = IncomingMessage & { id?: string; originalUrl?: string };

/** What a request line says of the request: an allow-list, never bodies or credentials. */
function requestFields(req: LoggedRequest) {
  return {
    id: req.id,
    method: req.method,
    url: loggableUrl(req.originalUrl ?? req.url ?? ''),
    remoteAddress: req.socket?.remoteAddress,
    userAgent: req.headers['user-agent'],
    contentType: req.headers['content-type'],
    contentLength: req.headers['content-length'],
  };
}

function levelFor(req: LoggedRequest, res: ServerResponse): 'error' | 'warn' | 'info' | 'debug' {
  // 503 is an outage of the database or Redis (already logged with its cause), not a bug
  if (res.statusCode === 503) return 'warn';
  if (res.statusCode >= 500) return 'error';
  // probes and scrapers poll: at debug, so they do not drown the rest (however they write the path)
  if (isProbePath((req.originalUrl ?? req.url ?? '').split(/[?#]/, 1)[0])) return 'debug';
  return 'info';
}

/**
 * Request logging: one JSON line per finished (or abandoned) request with id, method,
 * loggable URL, status and time in ms. Only an allow-list of request headers is logged,
 * never bodies, never response headers (Location carries tokens, Set-Cookie sessions). Sets
 * req.id and echoes it in X-Request-Id.
 *
 * Written here rather than with pino-http: that builds a child logger per request, running
 * the serializers and redaction over the request before anyone knows whether a line will
 * be written; that was a fifth of the CPU time of a token validation. Here the line is
 * built only when its level is enabled, once, when the answer is done.
 */
export function requestLogger(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const request = req as LoggedRequest;
    const id = requestIdFor(req);
    request.id = id;
    res.setHeader('X-Request-Id', id);
    const start = performance.now();
    whenResponseDone(req, res, () => {
      const level = levelFor(request, res);
      if (!logger.isLevelEnabled(level)) return;
      const message = res.writableEnded ? `${req.method} ${res.statusCode}` : `${req.method} aborted before the answer`;
      // run from the response's 'close': a log sink that throws would end the process
      quietly(() => logger[level]({ req: requestFields(request), res: { statusCode: res.statusCode }, responseTime: Math.round(performance.now() - start) }, message));
    });
    next();
  };
}
