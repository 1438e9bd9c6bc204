import pino, { type Logger } from 'pino';

/** Paths whose values never reach the log, whatever logs them. */
export const REDACT_PATHS = [
  'password', '*.password', 'client_secret', '*.client_secret', 'secret', '*.secret', 'token', '*.token',
  'totp', '*.totp', 'code', '*.code', 'req.headers.authorization', 'req.headers.cookie',
  'res.headers["set-cookie"]', 'headers.authorization', 'headers.cookie',
];

/** The process logger: JSON lines on stdout. */
export function createLogger(level: string): Logger {
  return pino({ level, redact: { paths: REDACT_PATHS, censor: '[redacted]' } });
}
