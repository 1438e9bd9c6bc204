import dc from 'node:diagnostics_channel';
import http from 'node:http';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceUnavailableError } from '../../src/http/errors.ts';
import { createLogger } from '../../src/logging/logger.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient } from '../helpers/factories.ts';

/** One POST, raw (the test helpers hold answers to the API reference, which a bare failure is not). */
function post(url: string, body: unknown): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** A broken log sink (found by a review helper, 2026-11-27): the answers and the process must not depend on it. */
describe('a logger that throws', () => {
  let app: TestApp;
  let creds: { client_id: string; client_secret: string };
  const logger = createLogger('info', new Writable({ write(_c, _e, done) { done(); } }));
  let failRequestLines = false;
  let failOutageLines = false;
  beforeAll(async () => {
    app = await startTestApp({}, { logger });
    const client = await makeClient(app);
    creds = { client_id: client.client_id, client_secret: client.client_secret };
    (app.services.sso as { validate: unknown }).validate = async () => {
      throw new Error('boom');
    };
    const error = logger.error.bind(logger);
    logger.error = ((obj: unknown, msg?: string) => {
      if (msg === 'unhandled error') throw new Error('log sink down');
      return error(obj as object, msg);
    }) as typeof logger.error;
    for (const level of ['info', 'warn'] as const) {
      const write = logger[level].bind(logger);
      logger[level] = ((obj: unknown, msg?: string) => {
        if (failRequestLines && typeof msg === 'string' && /^(GET|POST) /.test(msg)) throw new Error('log sink down');
        if (failOutageLines && msg === 'service unavailable') throw new Error('log sink down');
        return write(obj as object, msg);
      }) as typeof logger.info;
    }
  });
  afterAll(() => app?.close());

  it('while logging an unhandled error: the answer is the JSON 500, the same on the fast path and through Express', async () => {
    const target = await app.listen();
    const body = { ...creds, token: 'not-a-jwt' };
    const express = await post(`${target}/api/sso/validate?via=express`, body);
    const fast = await post(`${target}/api/sso/validate`, body);
    for (const [name, r] of [['express', express], ['fast path', fast]] as const) {
      expect(r.status, name).toBe(500);
      expect(r.headers['content-type'], name).toBe('application/json; charset=utf-8');
      expect(JSON.parse(r.text), name).toMatchObject({ error: 'internal_error', message: 'Internal server error' });
      expect(r.text, name).not.toMatch(/at .*\.ts|boom|log sink/);
    }
  });

  it('while logging an outage: still the 503 with Retry-After (the diff\'s review helper: a bare 500 without it)', async () => {
    const target = await app.listen();
    const validate = app.services.sso.validate;
    (app.services.sso as { validate: unknown }).validate = async () => {
      throw new ServiceUnavailableError('ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:5432');
    };
    failOutageLines = true;
    try {
      for (const path of ['/api/sso/validate', '/api/sso/validate?via=express']) {
        const r = await post(`${target}${path}`, { ...creds, token: 'not-a-jwt' });
        expect({ status: r.status, retryAfter: r.headers['retry-after'], error: JSON.parse(r.text).error }, path)
          .toStrictEqual({ status: 503, retryAfter: '2', error: 'service_unavailable' });
      }
    } finally {
      failOutageLines = false;
      (app.services.sso as { validate: unknown }).validate = validate;
    }
  });

  it('while writing a request\'s log line: the process goes on serving', async () => {
    const target = await app.listen();
    failRequestLines = true;
    try {
      for (let i = 0; i < 3; i++) expect((await post(`${target}/api/sso/token`, { ...creds, username: 'nobody' })).status).toBe(404);
      await new Promise((resolve) => setTimeout(resolve, 50)); // the lines are written when each answer's connection is done
    } finally {
      failRequestLines = false;
    }
    const health = await new Promise<number>((resolve, reject) => http.get(`${target}/healthz`, { agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode!);
    }).on('error', reject));
    expect(health).toBe(200);
  });
});

/**
 * Tracing agents subscribe to Express's router channel (`express.router.request`, router 2.3);
 * the fast path runs the route's steps without it, so a traced process hands hot requests to
 * Express (found by a review helper, 2026-11-27).
 */
describe('diagnostics_channel tracing of the hot routes', () => {
  let app: TestApp;
  let creds: { client_id: string; client_secret: string };
  const seen = new Map<string, { steps: number; routes: string[] }>();
  const start = (ctx: { req?: { originalUrl?: string; url?: string }; route?: string | { path?: string } }) => {
    const url = ctx.req?.originalUrl ?? ctx.req?.url ?? '';
    const entry = seen.get(url) ?? { steps: 0, routes: [] };
    entry.steps++;
    const route = typeof ctx.route === 'string' ? ctx.route : ctx.route?.path;
    if (route && !entry.routes.includes(route)) entry.routes.push(route);
    seen.set(url, entry);
  };
  const channel = dc.tracingChannel('express.router.request');
  const handlers = { start, end() {}, asyncStart() {}, asyncEnd() {}, error() {} };
  beforeAll(async () => {
    app = await startTestApp();
    const client = await makeClient(app);
    creds = { client_id: client.client_id, client_secret: client.client_secret };
    channel.subscribe(handlers as never);
  });
  afterAll(async () => {
    channel.unsubscribe(handlers as never);
    await app?.close();
  });

  it('publishes the steps of a hot request as Express does for the same request', async () => {
    const body = { ...creds, token: 'not-a-jwt' };
    expect((await app.http.post('/api/sso/validate?via=express', body)).status).toBe(401);
    expect((await app.http.post('/api/sso/validate', body)).status).toBe(401);
    const express = seen.get('/api/sso/validate?via=express');
    expect(express?.steps, 'Express publishes its steps').toBeGreaterThan(0);
    expect(express?.routes, 'with the matched route pattern').toContain('/api/sso/validate');
    expect(seen.get('/api/sso/validate'), 'the hot request\'s steps, as Express publishes them').toStrictEqual(express);
  });
});
