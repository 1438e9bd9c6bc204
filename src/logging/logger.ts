import pino, { type DestinationStream, type Logger } from 'pino';

/** Field names whose values are secrets wherever they appear in a logged object. */
const SECRET_KEYS = [
  'password', 'current_password', 'new_password', 'client_secret', 'secret', 'token', 'access_token',
  'refresh_token', 'id_token', 'totp', 'code', 'recovery_code', 'recovery_codes', 'cookie', 'authorization',
  'jwt', 'session', 'sid', '_csrf', 'csrf_token',
];

/**
 * Paths whose values never reach the log, whatever logs them: the secret keys at the top level
 * and up to two levels deep, plus the headers that carry credentials.
 */
export const REDACT_PATHS = [
  ...SECRET_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`]),
  'req.headers.authorization', 'req.headers.cookie', 'req.headers["x-api-key"]',
  'res.headers["set-cookie"]', 'res.headers.location', 'headers.authorization', 'headers.cookie',
];

/**
 * The process logger: JSON lines on stdout (or on `destination`, which tests use to capture
 * the output), with every secret-bearing path redacted.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = { level, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, serializers: { err: safeError } };
  return destination ? pino(options, destination) : pino(options);
}

/**
 * Errors are logged by type, message, code and stack only: other enumerable fields may hold
 * request data (body-parser errors carry the raw body, driver errors the row values). The
 * code (ECONNREFUSED, a SQLSTATE) is logged as `error_code`: `code` is redacted wherever it
 * appears, for the two-factor codes of request bodies, and an error's code went with them.
 */
export function safeError(err: unknown): Record<string, unknown> {
  if (!(err instanceof Error)) return { message: String(err) };
  const code = (err as { code?: unknown }).code;
  return {
    type: err.constructor?.name ?? 'Error',
    message: err.message,
    ...(typeof code === 'string' || typeof code === 'number' ? { error_code: code } : {}),
    stack: err.stack,
    ...(err.cause instanceof Error ? { cause: safeError(err.cause) } : {}),
  };
}

/**
 * Runs a log call whose failure (a log sink that throws) must change nothing else: an answer
 * goes out as it would have, a response's 'close' handler does not end the process. The line is
 * lost with the sink.
 */
export function quietly(log: () => void): void {
  try {
    log();
  } catch {
    // nowhere left to say it
  }
}
