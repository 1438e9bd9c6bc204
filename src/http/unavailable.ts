/**
 * Tells an outage of a backing store (PostgreSQL, the embedded database, Redis) from a bug.
 * An outage is answered 503 with Retry-After and logged as a warning with its cause; anything
 * else stays a 500 logged with its stack (src/http/errors.ts).
 */

import { isOutageSqlState } from '../db/sqlstate.ts';

/** Socket errors of a connection that could not be made or was lost. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN',
  'ENETDOWN', 'ECONNABORTED', 'EAI_AGAIN', 'ENOTFOUND',
]);

/** Messages of node-postgres, PGlite and ioredis that carry no code. */
const OUTAGE_MESSAGES = [
  /^Connection terminated/i, // node-postgres: the server went away (also "... due to connection timeout")
  /timeout exceeded when trying to connect/i, // node-postgres pool: connectionTimeoutMillis
  /Client has encountered a connection error and is not queryable/i,
  /Cannot use a pool after calling end on the pool/i, // closing down
  /Query read timeout/i,
  /^PGlite is closed/i, // the embedded database was closed under us
  /^Connection is closed\.?$/i, // ioredis
  /Stream isn't writeable/i, // ioredis without its offline queue
  /Reached the max retries per request limit/i, // ioredis MaxRetriesPerRequestError
  /^Command timed out$/, // ioredis commandTimeout: a Redis that does not answer
];

/**
 * Redis replies that say it cannot serve now, not that the command was wrong: a replica
 * after a failover (READONLY), a server loading its data, out of memory or unable to persist,
 * a replica without its primary, a script running, a cluster reconfiguring.
 */
const REDIS_UNAVAILABLE = /^(READONLY|LOADING|OOM|MISCONF|MASTERDOWN|BUSY|CLUSTERDOWN|TRYAGAIN)\b/;

/**
 * If `err` (or its cause, or one of an AggregateError's errors) is a lost or refused
 * connection, a timeout, or a database that cannot serve now, a short description of it
 * for the log ("ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:5432"); otherwise null.
 */
export function outageCause(err: unknown, depth = 0): string | null {
  if (depth > 4 || typeof err !== 'object' || err === null) return null;
  const e = err as { code?: unknown; errno?: unknown; syscall?: unknown; message?: unknown; name?: unknown; cause?: unknown; errors?: unknown };
  const code = typeof e.code === 'string' ? e.code : undefined;
  const message = typeof e.message === 'string' ? e.message : '';
  const described = () => (code ? `${code}: ${message}` : message) || String(e.name ?? 'unknown');
  if (code && NETWORK_CODES.has(code)) return described();
  // a Unix socket that is not there (the embedded database's socket while the service is down)
  if (code === 'ENOENT' && e.syscall === 'connect') return described();
  if (code && isOutageSqlState(code)) return described();
  if (e.name === 'MaxRetriesPerRequestError') return described();
  if (OUTAGE_MESSAGES.some((re) => re.test(message))) return described();
  if (e.name === 'ReplyError' && REDIS_UNAVAILABLE.test(message)) return described();
  if (Array.isArray(e.errors)) {
    for (const inner of e.errors) {
      const found = outageCause(inner, depth + 1);
      if (found) return found;
    }
  }
  return e.cause === undefined ? null : outageCause(e.cause, depth + 1);
}

/**
 * The fields to log a failure of background work with: `{ outage }` (a cause, no stack) when
 * the database or Redis is out, which the work survives by trying again; `{ err }` otherwise.
 */
export function failureFields(err: unknown): { outage: string } | { err: unknown } {
  const outage = outageCause(err);
  return outage === null ? { err } : { outage };
}
