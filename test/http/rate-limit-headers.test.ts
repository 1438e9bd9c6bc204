import express, { type ErrorRequestHandler, type RequestHandler } from 'express';
import { rateLimit } from 'express-rate-limit';
import supertest from 'supertest';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createRateLimiters } from '../../src/http/rate-limit.ts';

/**
 * The service writes the draft-8 RateLimit headers itself, keeping each key's partition key
 * (src/http/rate-limit.ts); they must be what express-rate-limit's own `standardHeaders:
 * 'draft-8'` writes, on the answers under the limit and on the 429s, for every key.
 */
describe('RateLimit headers', () => {
  beforeEach(() => {
    // one clock for both limiters, so that their reset seconds agree
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(new Date('2026-11-26T12:00:00.400Z'));
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('are byte for byte those of express-rate-limit draft-8, under the limit and past it, per key', async () => {
    const limiters = createRateLimiters({
      REDIS_URL: undefined, RATE_LIMIT_LOGIN_PER_MIN: 3, RATE_LIMIT_VALIDATE_PER_MIN: 3, RATE_LIMIT_TOKEN_PER_MIN: 3, RATE_LIMIT_USER_PER_MIN: 3, RATE_LIMIT_CLIENT_AUTH_FAILURES_PER_MIN: 3,
    });
    const library = rateLimit({
      windowMs: 60_000, limit: 3, standardHeaders: 'draft-8', legacyHeaders: false, identifier: 'validate', validate: false,
      keyGenerator: (_req, res) => String((res.locals.client as { client_id: string }).client_id),
    });
    const asClient: RequestHandler = (req, res, next) => {
      res.locals.client = { client_id: String(req.query.client) };
      next();
    };
    const answer: RequestHandler = (_req, res) => {
      res.json({ ok: true });
    };
    const onError: ErrorRequestHandler = (err, _req, res, _next) => {
      res.status((err as { status?: number }).status ?? 500).json({ error: 'refused' });
    };
    const app = express();
    app.get('/ours', asClient, limiters.validation, answer);
    app.get('/library', asClient, library, answer);
    app.use(onError);

    const seen: string[] = [];
    for (const client of ['shop', 'shop', 'crm', 'shop', 'shop', 'crm']) {
      vi.setSystemTime(Date.now() + 1_300); // the reset seconds count down
      const ours = await supertest(app).get(`/ours?client=${client}`);
      const theirs = await supertest(app).get(`/library?client=${client}`);
      expect(ours.status, `${client}: the same status`).toBe(theirs.status);
      expect(ours.headers.ratelimit, `${client}: RateLimit`).toBe(theirs.headers.ratelimit);
      expect(ours.headers['ratelimit-policy'], `${client}: RateLimit-Policy`).toBe(theirs.headers['ratelimit-policy']);
      seen.push(`${ours.status} ${ours.headers.ratelimit} ${ours.headers['ratelimit-policy']}`);
    }
    // the comparison covered both sides of the limit and two partition keys
    expect(seen.filter((s) => s.startsWith('429'))).toHaveLength(1);
    expect(seen[0]).toMatch(/^200 "validate"; r=2; t=60 "validate"; q=3; w=60; pk=:[A-Za-z0-9+/=]+:$/);
    expect(new Set(seen.map((s) => s.split('pk=')[1])).size).toBe(2);
    await limiters.close();
  });
});
