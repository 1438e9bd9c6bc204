import { hash } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import { ipKeyGenerator, rateLimit, type RateLimitInfo, type Store } from 'express-rate-limit';
import { createRequire } from 'node:module';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { RedisStore, type RedisReply } from 'rate-limit-redis';
import type { Config } from '../config.ts';
import { clientIp } from './client-ip.ts';
import { AppError } from './errors.ts';
import { createFailureLimit, type FailureLimit } from './failure-limit.ts';
import { outageCause } from './unavailable.ts';

/** The counter of refused requests (src/metrics/metrics.ts `rateLimited`), by limiter. */
export interface RateLimitMetrics {
  rateLimited: { inc(labels: { limiter: string }): void };
}

/**
 * RedisStore loads its Lua scripts once, when the limiter is built; if Redis was down then,
 * that promise stays rejected and every later request would fail even after Redis is back.
 * A failed call loads them again, so the limiter recovers with Redis.
 */
class RecoveringRedisStore extends RedisStore {
  override async increment(key: string) {
    try {
      return await super.increment(key);
    } catch (err) {
      this.reloadScripts();
      throw err;
    }
  }

  override async get(key: string) {
    try {
      return await super.get(key);
    } catch (err) {
      this.reloadScripts();
      throw err;
    }
  }

  private reloadScripts(): void {
    this.incrementScriptSha = this.loadIncrementScript();
    this.getScriptSha = this.loadGetScript();
    // the next call awaits (and reports) these; unobserved now, they must not crash the process
    this.incrementScriptSha.catch(() => {});
    this.getScriptSha.catch(() => {});
  }
}

/**
 * ioredis, loaded only by a service with REDIS_URL: about 12 MiB resident that a service
 * counting in its own memory never uses (docs/performance.md, "Memory at rest and under load"). ioredis is CommonJS,
 * so it is required synchronously here and the limiters are still built in one call.
 */
function loadRedis(): typeof Redis {
  return (createRequire(import.meta.url)('ioredis') as { Redis: typeof Redis }).Redis;
}

/** Every limit counts the requests of one minute. */
const WINDOW_MS = 60_000;

/** What express-rate-limit puts on the request it counted (its requestPropertyName). */
const infoOf = (req: Request): RateLimitInfo => (req as Request & { rateLimit: RateLimitInfo }).rateLimit;

/** Partition keys kept at most; past it the memo starts again (keys by IP address are unbounded). */
const PARTITION_KEYS_KEPT = 10_000;

/**
 * The IETF draft-8 `RateLimit` and `RateLimit-Policy` headers of limiter `name`, written
 * exactly as express-rate-limit's `standardHeaders: 'draft-8'` writes them
 * (node_modules/express-rate-limit/dist/index.mjs, setDraft8Headers; test/http/rate-limit-headers.test.ts
 * compares the two), but for one thing: the partition key, the first 12 hex digits of the
 * counter key's SHA-256 in base64, is kept per key instead of hashed on every request. The
 * library hashes it anew each time, and on the hot routes, whose keys are a handful of
 * client ids, that hash and its header appends were a twentieth of a validation's CPU time
 * (docs/performance.md).
 */
function draft8Headers(name: string, windowMs: number): (res: Response, info: RateLimitInfo) => void {
  const windowSeconds = Math.ceil(windowMs / 1000);
  const partitionKeys = new Map<string, string>();
  const partitionKey = (key: string): string => {
    let pk = partitionKeys.get(key);
    if (pk === undefined) {
      if (partitionKeys.size >= PARTITION_KEYS_KEPT) partitionKeys.clear();
      pk = Buffer.from(hash('sha256', key, 'hex').slice(0, 12)).toString('base64');
      partitionKeys.set(key, pk);
    }
    return pk;
  };
  const put = (res: Response, field: string, value: string): void => {
    if (res.hasHeader(field)) res.append(field, value); // the library appends; on our routes nothing set it before
    else res.setHeader(field, value);
  };
  return (res, info) => {
    if (res.headersSent) return;
    const resetSeconds = info.resetTime ? Math.max(0, Math.ceil((info.resetTime.getTime() - Date.now()) / 1000)) : windowSeconds;
    put(res, 'RateLimit', `"${name}"; r=${info.remaining}; t=${resetSeconds}`);
    put(res, 'RateLimit-Policy', `"${name}"; q=${info.limit}; w=${windowSeconds}; pk=:${partitionKey(info.key)}:`);
  };
}

/** The rate limits (docs/contract.md, "Limits"), as Express middleware. */
export interface RateLimiters {
  /** Login endpoints, per IP address. */
  login: RequestHandler;
  /** Token validation, per authenticated client system (res.locals.client). */
  validation: RequestHandler;
  /** Token issue, per authenticated client system: a client issues one token per sign-in, each validated once. */
  tokenIssue: RequestHandler;
  /** User management and admin API, per authenticated user (res.locals.user). */
  user: RequestHandler;
  /**
   * The same per-user limit, for a signed-in user only (nobody else is counted): a page that
   * issues a token at once to a signed-in browser and shows a form to anyone else (/sso/login).
   */
  userWhenSignedIn: RequestHandler;
  /** Failed client authentications, per IP address (src/clients/guards.ts). */
  clientAuthFailures: FailureLimit;
  close(): Promise<void>;
}

/**
 * The key a caller's address is counted under by the limits "per IP address": an IPv4
 * address itself, an IPv6 address by its /64. One IPv6 host or network is given a /64 and can
 * take any address in it, so counting single IPv6 addresses would give it 2^64 budgets; a
 * /64 is the smallest block a network is assigned. (express-rate-limit's default, a /56, let
 * every host of a cloud network or a site share one budget: a review helper, 2026-11-27.)
 */
export function addressKey(ip: string): string {
  return ipKeyGenerator(ip, 64);
}

/** How long a Redis command (and a connection attempt) may take before it counts as an outage. */
export const REDIS_COMMAND_TIMEOUT_MS = 2_000;

/**
 * Builds the limiters. With REDIS_URL the counters live in Redis and every instance shares
 * them; otherwise they live in this process.
 *
 * When Redis cannot be reached, a limited request is refused with 503 service_unavailable
 * (passOnStoreError: false; the error handler classifies the store's error): letting it
 * through would switch the login and validation limits off during every Redis outage.
 */
export function createRateLimiters(
  config: Pick<Config, 'REDIS_URL' | 'RATE_LIMIT_LOGIN_PER_MIN' | 'RATE_LIMIT_VALIDATE_PER_MIN' | 'RATE_LIMIT_TOKEN_PER_MIN' | 'RATE_LIMIT_USER_PER_MIN' | 'RATE_LIMIT_CLIENT_AUTH_FAILURES_PER_MIN'>,
  metrics?: RateLimitMetrics,
  logger?: Pick<Logger, 'warn'>,
): RateLimiters {
  // every command is bounded (REDIS_COMMAND_TIMEOUT_MS), queued ones too: a Redis that stops
  // answering, or accepts connections and never answers, is an outage (503), never a request
  // held open for ever
  const redis = config.REDIS_URL
    ? new (loadRedis())(config.REDIS_URL, { lazyConnect: false, maxRetriesPerRequest: 2, commandTimeout: REDIS_COMMAND_TIMEOUT_MS, connectTimeout: REDIS_COMMAND_TIMEOUT_MS })
    : undefined;
  redis?.on('error', () => {}); // reconnects by itself; a refused command surfaces as a request error
  const store = (prefix: string): Store | undefined =>
    redis
      ? new RecoveringRedisStore({ prefix: `auth-rl:${prefix}:`, sendCommand: (command: string, ...args: string[]) => redis.call(command, ...args) as Promise<RedisReply> })
      : undefined;

  const limiter = (name: string, limit: number, key: (req: Request, res: { locals: Record<string, unknown> }) => string): RequestHandler => {
    const headers = draft8Headers(name, WINDOW_MS);
    const counted = rateLimit({
      windowMs: WINDOW_MS,
      limit,
      standardHeaders: false, // written by `headers`, as the library's 'draft-8' writes them (see draft8Headers)
      legacyHeaders: false,
      store: store(name),
      identifier: name,
      keyGenerator: (req, res) => key(req, res),
      validate: false, // its configuration checks are for development; they ran on every request
      passOnStoreError: false, // never fail open: a store error is answered 503 (see above)
      // a script load that failed at start (Redis down) is an outage, not a crash
      logger: {
        error: (err: unknown, message?: string) => logger?.warn({ outage: outageCause(err) ?? String(err) }, message ?? 'rate limiter store failed'),
        warn: (err: unknown, message?: string) => logger?.warn({ outage: outageCause(err) ?? String(err) }, message ?? 'rate limiter store warning'),
      },
      handler: (req, res, next) => {
        const info = infoOf(req);
        headers(res, info);
        const reset = info.resetTime;
        metrics?.rateLimited.inc({ limiter: name });
        const retryAfter = Math.max(1, Math.ceil(((reset?.getTime() ?? Date.now() + 60_000) - Date.now()) / 1000));
        next(new AppError(429, 'rate_limited', 'Too many requests; try again later', {
          extra: { retry_after: retryAfter },
          headers: { 'Retry-After': String(retryAfter) },
        }));
      },
    });
    // the answer of a counted request that is under the limit carries the headers too
    return (req, res, next) => counted(req, res, (err?: unknown) => {
      if (err === undefined) headers(res, infoOf(req));
      next(err as Error | undefined);
    });
  };

  const user = limiter('user', config.RATE_LIMIT_USER_PER_MIN, (req, res) => {
    const signedIn = res.locals.user as { id: number } | undefined;
    return signedIn ? `u${signedIn.id}` : `ip:${addressKey(clientIp(req))}`;
  });
  return {
    login: limiter('login', config.RATE_LIMIT_LOGIN_PER_MIN, (req) => addressKey(clientIp(req))),
    validation: limiter('validate', config.RATE_LIMIT_VALIDATE_PER_MIN, (_req, res) => String((res.locals.client as { client_id: string }).client_id)),
    tokenIssue: limiter('token', config.RATE_LIMIT_TOKEN_PER_MIN, (_req, res) => String((res.locals.client as { client_id: string }).client_id)),
    user,
    userWhenSignedIn: (req, res, next) => (res.locals.user ? user(req, res, next) : next()),
    clientAuthFailures: createFailureLimit(config.RATE_LIMIT_CLIENT_AUTH_FAILURES_PER_MIN, WINDOW_MS, store('client-auth-failures'), addressKey,
      () => metrics?.rateLimited.inc({ limiter: 'client_auth' })),
    async close() {
      // QUIT is a command like any other: bounded, and a Redis that does not answer it is left
      await redis?.quit().catch(() => redis.disconnect());
    },
  };
}
