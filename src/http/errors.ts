import type { ServerResponse } from 'node:http';
import type { ErrorRequestHandler, RequestHandler } from 'express';
import type { Logger } from 'pino';
import { quietly } from '../logging/logger.ts';
import { isApiPath } from './api-paths.ts';
import { outageCause } from './unavailable.ts';

/**
 * An error the client is meant to see: HTTP status, a stable snake_case code, a human
 * message, and optional extra fields merged into the JSON body (e.g. retry_after).
 */
export class AppError extends Error {
  readonly status: number;
  readonly code: string;
  readonly extra: Record<string, unknown>;
  readonly headers: Record<string, string>;

  constructor(
    status: number,
    code: string,
    message: string,
    options: { cause?: unknown; extra?: Record<string, unknown>; headers?: Record<string, string> } = {},
  ) {
    super(message, { cause: options.cause });
    this.status = status;
    this.code = code;
    this.extra = options.extra ?? {};
    this.headers = options.headers ?? {};
  }
}

/** Seconds a client is asked to wait after an outage answer (Retry-After). */
export const OUTAGE_RETRY_AFTER_SECONDS = 2;

/**
 * The database or Redis cannot be reached or timed out: 503 service_unavailable with
 * Retry-After, logged as a warning with `outage` (the cause) and no stack. Never a reason to
 * let a request through: whatever needed the store is refused.
 */
export class ServiceUnavailableError extends AppError {
  /** What failed, for the log line ("ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:5432"). */
  readonly outage: string;

  constructor(outage: string, options: { cause?: unknown } = {}) {
    super(503, 'service_unavailable', 'The service is temporarily unavailable; try again in a few seconds', {
      cause: options.cause,
      headers: { 'Retry-After': String(OUTAGE_RETRY_AFTER_SECONDS) },
    });
    this.outage = outage;
  }
}

/** `err` as a ServiceUnavailableError when it is an outage of a backing store, else null. */
export function asServiceUnavailable(err: unknown): ServiceUnavailableError | null {
  if (err instanceof ServiceUnavailableError) return err;
  if (err instanceof AppError) return null;
  // a body the client stopped sending (raw-body's ECONNABORTED) is the client's doing, not an outage
  if (bodyParserAnswer(err)) return null;
  const cause = outageCause(err);
  return cause === null ? null : new ServiceUnavailableError(cause, { cause: err });
}

/** Errors raised by body-parser, mapped to the codes of docs/contract.md ("Answers"). */
const BODY_PARSER_ERRORS: Record<string, [number, string, string]> = {
  'entity.parse.failed': [400, 'invalid_json', 'The request body is not valid JSON'],
  'entity.too.large': [413, 'payload_too_large', 'The request body is too large'],
  'encoding.unsupported': [415, 'unsupported_media_type', 'Unsupported content encoding'],
  'charset.unsupported': [415, 'unsupported_media_type', 'Unsupported charset'],
  'request.aborted': [400, 'request_aborted', 'The request was aborted'],
  'request.size.invalid': [400, 'bad_request', 'Request size did not match Content-Length'],
};

/** The answer for an error body-parser (or the fast path's reader) raised, by its `type`; undefined for any other error. */
function bodyParserAnswer(err: unknown): [number, string, string] | undefined {
  const type = (err as { type?: unknown } | null)?.type;
  return typeof type === 'string' && Object.hasOwn(BODY_PARSER_ERRORS, type) ? BODY_PARSER_ERRORS[type] : undefined;
}

/** Turns any error into a JSON answer `{error, message}`; never a stack trace. */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  const handle = answerError(logger);
  // Never fails: Express would hand a failure here to its finalhandler, an HTML page with the
  // stack outside production; a log sink that throws, say, still gets the JSON 500.
  return (thrown, req, res, next) => {
    try {
      handle(thrown, req, res, next);
    } catch {
      answerInternalError(res);
    }
  };
}

/** The body of a 500, written without anything that could fail again. */
const INTERNAL_ERROR = JSON.stringify({ error: 'internal_error', message: 'Internal server error' });

/** A JSON 500 (when the answer has not begun; otherwise the connection is closed). */
export function answerInternalError(res: ServerResponse): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.statusCode = 500;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', String(Buffer.byteLength(INTERNAL_ERROR)));
  res.end(INTERNAL_ERROR);
}

function answerError(logger: Logger): ErrorRequestHandler {
  return (thrown, req, res, _next) => {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const err = asServiceUnavailable(thrown) ?? thrown;
    const parserAnswer = bodyParserAnswer(err);
    let status = 500;
    let body: Record<string, unknown>;
    if (err instanceof ServiceUnavailableError) {
      // an outage, not a bug: a warning naming the cause, no stack
      quietly(() => logger.warn({ outage: err.outage, requestId: (req as { id?: unknown }).id, method: req.method, path: req.path }, 'service unavailable'));
    }
    if (err instanceof AppError) {
      status = err.status;
      body = { error: err.code, message: err.message, ...err.extra };
      for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
    } else if (parserAnswer) {
      const [s, code, message] = parserAnswer;
      status = s;
      body = { error: code, message };
    } else if (Number.isInteger(err?.status) && err.status >= 400 && err.status < 500) {
      status = err.status;
      body = { error: 'bad_request', message: 'The request could not be processed' };
    } else {
      const requestId = (req as { id?: unknown }).id;
      quietly(() => logger.error({ err, requestId, method: req.method, path: req.path }, 'unhandled error'));
      body = { error: 'internal_error', message: 'Internal server error', ...(requestId ? { request_id: String(requestId) } : {}) };
    }
    if (wantsPage(req)) {
      // a browser on a page route gets a page, not JSON; should rendering itself fail, JSON after all
      const message = status === 503
        ? 'The service is briefly unavailable. Please try again in a few seconds.'
        : status >= 500 ? 'Something went wrong on our side. Please try again in a moment.' : String(body.message);
      res.status(status).render('error', { status, title: PAGE_TITLES[status] ?? 'The request could not be completed', message, user: res.locals.user },
        (renderErr: unknown, html: string) => (renderErr ? res.json(body) : res.send(html)));
      return;
    }
    res.status(status).json(body);
  };
}

const PAGE_TITLES: Record<number, string> = {
  400: 'This link does not work',
  403: 'Not allowed',
  404: 'Page not found',
  429: 'Too many requests',
  500: 'Something went wrong',
  503: 'Try again in a moment',
};

/**
 * Outside the API and the probes, a client that prefers HTML to JSON (a browser) is answered
 * with an error page. The path is the one Express routed (src/http/api-paths.ts): this handler
 * is the app's own, so `req.url` is the whole URL again here.
 */
function wantsPage(req: Parameters<RequestHandler>[0]): boolean {
  return !isApiPath(req.path) && req.accepts(['json', 'html']) === 'html';
}

/** The answer for any other path no router claimed (after every router and apiNotFound). */
export const pageNotFound: RequestHandler = (_req, _res, next) => {
  next(new AppError(404, 'not_found', 'There is no page at this address.'));
};

/** The answer for any /api path no router claimed. */
export const apiNotFound: RequestHandler = (req, _res, next) => {
  next(new AppError(404, 'not_found', `No route for ${req.method} ${req.originalUrl.split('?')[0]}`));
};
