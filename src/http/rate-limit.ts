import type { Request, RequestHandler } from 'express';
import { ipKeyGenerator, rateLimit, type Store } from 'express-rate-limit';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { RedisStore, type RedisReply } from 'rate-limit-redis';
import type { Config } from '../config.ts';
import type { Metrics } from '../metrics/metrics.ts';
import { clientIp } from './client-ip.ts';
import { AppError } from './errors.ts';
import { outageCause } from './unavailable.ts';

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
  close(): Promise<void>;
}

/**
 * Builds the limiters. With REDIS_URL the counters live in Redis and every instance shares
 * them; otherwise they live in this process.
 *
 * When Redis cannot be reached, a limited request is refused with 503 service_unavailable
 * (passOnStoreError: false; the error handler classifies the store's error): letting it
 * through would switch the login and validation limits off during every Redis outage.
 */
export function createRateLimiters(
  config: Pick<Config, 'REDIS_URL' | 'RATE_LIMIT_LOGIN_PER_MIN' | 'RATE_LIMIT_VALIDATE_PER_MIN' | 'RATE_LIMIT_TOKEN_PER_MIN' | 'RATE_LIMIT_USER_PER_MIN'>,
  metrics?: Pick<Metrics, 'rateLimited'>,
  logger?: Pick<Logger, 'warn'>,
): RateLimiters {
  const redis = config.REDIS_URL ? new Redis(config.REDIS_URL, { lazyConnect: false, maxRetriesPerRequest: 2 }) : undefined;
  redis?.on('error', () => {}); // reconnects by itself; a refused command surfaces as a request error
  const store = (prefix: string): Store | undefined =>
    redis
      ? new RecoveringRedisStore({ prefix: `auth-rl:${prefix}:`, sendCommand: (command: string, ...args: string[]) => redis.call(command, ...args) as Promise<RedisReply> })
      : undefined;

  const limiter = (name: string, limit: number, key: (req: Request, res: { locals: Record<string, unknown> }) => string): RequestHandler =>
    rateLimit({
      windowMs: 60_000,
      limit,
      standardHeaders: 'draft-8',
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
      handler: (req, _res, next) => {
        const reset = (req as Request & { rateLimit?: { resetTime?: Date } }).rateLimit?.resetTime;
        metrics?.rateLimited.inc({ limiter: name });
        const retryAfter = Math.max(1, Math.ceil(((reset?.getTime() ?? Date.now() + 60_000) - Date.now()) / 1000));
        next(new AppError(429, 'rate_limited', 'Too many requests; try again later', {
          extra: { retry_after: retryAfter },
          headers: { 'Retry-After': String(retryAfter) },
        }));
      },
    });

  return {
    login: limiter('login', config.RATE_LIMIT_LOGIN_PER_MIN, (req) => ipKeyGenerator(clientIp(req))),
    validation: limiter('validate', config.RATE_LIMIT_VALIDATE_PER_MIN, (_req, res) => String((res.locals.client as { client_id: string }).client_id)),
    tokenIssue: limiter('token', config.RATE_LIMIT_TOKEN_PER_MIN, (_req, res) => String((res.locals.client as { client_id: string }).client_id)),
    user: limiter('user', config.RATE_LIMIT_USER_PER_MIN, (req, res) => {
      const user = res.locals.user as { id: number } | undefined;
      return user ? `u${user.id}` : `ip:${ipKeyGenerator(clientIp(req))}`;
    }),
    async close() {
      await redis?.quit().catch(() => {});
    },
  };
}
