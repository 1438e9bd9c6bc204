import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import v8 from 'node:v8';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer } from '../../src/app.ts';
import { createLogger } from '../../src/logging/logger.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { basicAuth, type HttpResponse, type RequestOptions, send, type Target } from '../helpers/http.ts';
import { parsePrometheus, sampleValue } from '../ops/helpers/prometheus.ts';

/*
 * Token issue and validation are served by the fast path in front of Express's router
 * (src/routes/fast-path.ts) when the path is written exactly as declared; written with a
 * query string, the same request goes through Express's router and the declaration's chain
 * mounted there. Every case below is sent both ways and must be answered alike.
 */

/** What may differ between two answers to two requests: when, which request, the counter's remaining count. */
const PER_REQUEST_HEADERS = new Set(['date', 'x-request-id', 'ratelimit', 'retry-after', 'connection', 'keep-alive']);
/**
 * Fields that differ from one answer to the next: a token and its redirect (by their jti), the
 * seconds to wait, and a validated token's expiry (two tokens issued either side of a second's end).
 */
const PER_ANSWER_FIELDS = ['token', 'redirect_url', 'retry_after', 'expires_at'];

function comparable(r: HttpResponse): { status: number; headers: Record<string, unknown>; body: unknown } {
  const headers = Object.fromEntries(Object.entries(r.headers).filter(([name]) => !PER_REQUEST_HEADERS.has(name)));
  const body = r.body && typeof r.body === 'object' ? { ...r.body } : r.text;
  if (body && typeof body === 'object' && PER_ANSWER_FIELDS.some((key) => key in body)) {
    // the shape is what must agree; so the length differs too
    for (const key of PER_ANSWER_FIELDS) if (key in body) (body as Record<string, unknown>)[key] = typeof (body as Record<string, unknown>)[key];
    delete headers['content-length'];
  }
  return { status: r.status, headers: { ...headers, 'header names': Object.keys(r.headers).sort() }, body };
}

describe('the fast path of token issue and validation', () => {
  let app: TestApp;
  const lines: Array<Record<string, any>> = [];
  let routerEntered = 0;
  let creds: { client_id: string; client_secret: string };
  let username: string;

  beforeAll(async () => {
    const sink = new Writable({ write(chunk, _enc, done) { lines.push(JSON.parse(String(chunk))); done(); } });
    app = await startTestApp({ LOG_LEVEL: 'info' }, { logger: createLogger('info', sink) });
    // Counts the requests Express's own router dispatches (application.js: app.handle -> this.router.handle).
    const router = (app.app as unknown as { router: { handle: (...args: unknown[]) => unknown } }).router;
    const dispatch = router.handle;
    router.handle = function counted(this: unknown, ...args: unknown[]) {
      routerEntered++;
      return dispatch.apply(this, args);
    };
    const client = await makeClient(app, { allowedIps: ['127.0.0.1', '::1'] });
    creds = { client_id: client.client_id, client_secret: client.client_secret };
    username = (await makeUser(app)).username;
  });
  afterAll(() => app.close());

  const issue = async () => (await app.http.post('/api/sso/token', { ...creds, username })).body.token as string;

  /**
   * Sends the case to the exact path (fast path) and with a query string (Express), each with a
   * fresh request: in-process through supertest (Node's own request and response objects), or
   * to `target`, a server's base URL.
   */
  async function bothWays(path: string, make: () => Promise<RequestOptions> | RequestOptions, target: Target = app.app) {
    const before = routerEntered;
    const fast = await send(target, path, { method: 'POST', ...(await make()) });
    const viaFast = routerEntered - before;
    const express = await send(target, `${path}?via=express`, { method: 'POST', ...(await make()) });
    const viaExpress = routerEntered - before - viaFast;
    return { fast, express, viaFast, viaExpress };
  }

  const json = (body: unknown): RequestOptions => ({ body });
  const raw = (text: string, type = 'application/json'): RequestOptions => ({ body: text, headers: { 'content-type': type } });
  /** The JSON text of `body` padded with spaces to exactly `bytes` bytes. */
  const padTo = (bytes: number, body: unknown) => {
    const text = JSON.stringify(body);
    return text + ' '.repeat(bytes - Buffer.byteLength(text));
  };
  const cases: Array<[string, string, () => Promise<RequestOptions> | RequestOptions, number]> = [
    ['a valid token', '/api/sso/validate', async () => json({ ...creds, token: await issue() }), 200],
    ['a token validated twice', '/api/sso/validate', async () => {
      const token = await issue();
      await app.http.post('/api/sso/validate', { ...creds, token });
      return json({ ...creds, token });
    }, 401],
    ['a token of the wrong shape', '/api/sso/validate', () => json({ ...creds, token: 'not-a-jwt' }), 401],
    ['a wrong client secret', '/api/sso/validate', async () => json({ ...creds, client_secret: 'wrong', token: await issue() }), 401],
    ['a body that is not JSON', '/api/sso/validate', () => ({ body: '{"client_id":', headers: { 'content-type': 'application/json' } }), 400],
    ['a body of another type', '/api/sso/validate', () => ({ body: 'token=x', headers: { 'content-type': 'text/plain' } }), 415],
    ['a body over 16 KiB', '/api/sso/validate', () => json({ ...creds, token: 'x'.repeat(17_000) }), 413],
    ['a missing field', '/api/sso/validate', () => json({ client_id: creds.client_id }), 400],
    ['a NUL character', '/api/sso/validate', () => json({ ...creds, token: 'a\u0000b' }), 400],
    ['a body with a UTF-8 byte order mark', '/api/sso/validate', () => raw(`\uFEFF${JSON.stringify({ ...creds, token: 'not-a-jwt' })}`), 401],
    ['a body typed with charset=utf-8', '/api/sso/validate', () => raw(JSON.stringify({ ...creds, token: 'not-a-jwt' }), 'application/json; charset=UTF-8'), 401],
    ['a body said to be UTF-16 that is not', '/api/sso/validate', () => raw(JSON.stringify({ ...creds, token: 'not-a-jwt' }), 'application/json; charset=utf-16'), 400],
    ['a body in a charset JSON does not allow', '/api/sso/validate', () => raw(JSON.stringify({ ...creds, token: 'not-a-jwt' }), 'application/json; charset=latin1'), 415],
    ['a body typed with a +json suffix', '/api/sso/validate', () => raw(JSON.stringify({ ...creds, token: 'not-a-jwt' }), 'application/vnd.example+json'), 401],
    ['a gzip-encoded body', '/api/sso/validate', () => ({ body: gzipSync(JSON.stringify({ ...creds, token: 'not-a-jwt' })), headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' } }), 401],
    ['a body typed with a no-break space after the type', '/api/sso/validate', () => raw(JSON.stringify({ ...creds, token: 'not-a-jwt' }), 'application/json\u00a0'), 415],
    ['an empty body', '/api/sso/validate', () => raw(''), 400],
    ['a body of JSON that is not an object', '/api/sso/validate', () => raw('"just a string"'), 400],
    ['a body of exactly 16 KiB', '/api/sso/validate', () => raw(padTo(16 * 1024, { ...creds, token: 'not-a-jwt' })), 401],
    ['a body one byte over 16 KiB', '/api/sso/validate', () => raw(padTo(16 * 1024 + 1, { ...creds, token: 'not-a-jwt' })), 413],
    ['a token on the legacy route', '/api/validate-token', async () => json({ ...creds, token: await issue() }), 200],
    ['the legacy route from outside the allow list', '/api/validate-token', async () => ({ ...json({ ...creds, token: await issue() }), localAddress: '127.0.0.2' }), 403],
    ['a token issue', '/api/sso/token', () => json({ ...creds, username }), 200],
    ['a token issue for nobody', '/api/sso/token', () => json({ ...creds, username: 'nobody-at-all' }), 404],
    ['a token issue from outside the allow list', '/api/sso/token', () => ({ ...json({ ...creds, username }), localAddress: '127.0.0.2' }), 403],
  ];

  /** Sends one case both ways (to `target`) and holds the two answers to each other. */
  async function expectAlike(path: string, make: () => Promise<RequestOptions> | RequestOptions, status: number, target?: Target) {
    const { fast, express, viaFast, viaExpress } = await bothWays(path, make, target);
    expect(viaFast, 'the exact path is served without Express\'s router').toBe(0);
    expect(viaExpress, 'with a query string the request goes through Express\'s router').toBe(1);
    expect(fast.status, fast.text).toBe(status);
    expect(comparable(fast)).toStrictEqual(comparable(express));
  }

  it.each(cases)('answers %s exactly as the Express chain does', async (_name, path, make, status) => {
    await expectAlike(path, make, status);
  });

  // The service's own server (createServer, as src/service.ts starts it): requests and
  // responses are born with the prototypes Express and the fast path give them.
  it.each(cases)('on the service\'s own server, answers %s exactly as the Express chain does', async (_name, path, make, status) => {
    await expectAlike(path, make, status, await app.listen());
  });

  // OpenID Connect's token endpoints: the provider mounted at /oidc, served the same way
  const basic = (secret: string) => basicAuth(creds.client_id, secret);
  const form = (fields: Record<string, string>, secret = creds.client_secret): RequestOptions => ({
    body: new URLSearchParams(fields).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(secret) },
  });
  const oidcCases: Array<[string, string, () => RequestOptions, number]> = [
    ['the introspection of an unknown token', '/oidc/token/introspection', () => form({ token: 'unknown-token-of-some-length-0123456789' }), 200],
    ['an introspection with a wrong client secret', '/oidc/token/introspection', () => form({ token: 'x' }, 'wrong'), 401],
    ['an introspection without a token', '/oidc/token/introspection', () => form({}), 400],
    ['a refresh with an unknown refresh token', '/oidc/token', () => form({ grant_type: 'refresh_token', refresh_token: 'unknown' }), 400],
    ['a code redemption with an unknown code', '/oidc/token', () => form({ grant_type: 'authorization_code', code: 'unknown', redirect_uri: 'https://client.example/sso/callback?from=auth' }), 400],
    ['a token request in JSON', '/oidc/token', () => ({ ...json({ grant_type: 'refresh_token', refresh_token: 'unknown' }), headers: { authorization: basic(creds.client_secret) } }), 400],
    ['the revocation of an unknown token', '/oidc/token/revocation', () => form({ token: 'unknown' }), 200],
    ['an introspection from outside the allow list', '/oidc/token/introspection', () => ({ ...form({ token: 'x' }), localAddress: '127.0.0.2' }), 403],
  ];

  it.each(oidcCases)('answers %s exactly as Express\'s mount of the provider does', async (_name, path, make, status) => {
    await expectAlike(path, make, status);
  });

  it.each(oidcCases)('on the service\'s own server, answers %s exactly as Express\'s mount of the provider does', async (_name, path, make, status) => {
    await expectAlike(path, make, status, await app.listen());
  });

  it('on the service\'s own server, requests and responses are born with Express\'s prototypes, so none is changed on a hot route', async () => {
    const server = createServer(app.app);
    const born: Array<{ request: boolean; response: boolean; node: boolean }> = [];
    server.prependListener('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      born.push({
        request: Object.getPrototypeOf(req) === app.app.request,
        // the fast path's response: Express's, with the direct res.json (src/http/fast-json.ts)
        response: Object.getPrototypeOf(Object.getPrototypeOf(res)) === app.app.response,
        node: req instanceof http.IncomingMessage && res instanceof http.ServerResponse,
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const r = await send(url, '/api/sso/validate', { method: 'POST', body: { ...creds, token: await issue() } });
      expect(r.status).toBe(200);
      expect((await send(url, '/healthz')).status, 'other routes too').toBe(200);
      expect(born).toStrictEqual([{ request: true, response: true, node: true }, { request: true, response: true, node: true }]);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('on the service\'s own server, hot requests and responses keep fast properties from birth to the answer', async () => {
    // V8's own view of an object's properties: fast (fields at fixed offsets) or a dictionary
    // (a hash lookup at every access); the flag is on only while this one function is compiled.
    v8.setFlagsFromString('--allow-natives-syntax');
    const hasFastProperties = new Function('o', 'return %HasFastProperties(o)') as (o: object) => boolean;
    v8.setFlagsFromString('--no-allow-natives-syntax');
    expect(hasFastProperties({ a: 1 }), 'the check itself').toBe(true);
    expect(hasFastProperties(Object.create(null)), 'the check itself').toBe(false);

    const server = createServer(app.app);
    const seen: Array<{ path: string; born: [boolean, boolean]; answered?: [boolean, boolean] }> = [];
    server.prependListener('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      const entry: (typeof seen)[number] = { path: req.url!, born: [hasFastProperties(req), hasFastProperties(res)] };
      seen.push(entry);
      res.once('finish', () => {
        entry.answered = [hasFastProperties(req), hasFastProperties(res)];
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const issued = await send(url, '/api/sso/token', { method: 'POST', body: { ...creds, username } });
      expect(issued.status, issued.text).toBe(200);
      const validated = await send(url, '/api/sso/validate', { method: 'POST', body: { ...creds, token: issued.body.token } });
      expect(validated.status, validated.text).toBe(200);
      const fast = { born: [true, true], answered: [true, true] };
      expect(seen).toStrictEqual([{ path: '/api/sso/token', ...fast }, { path: '/api/sso/validate', ...fast }]);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('names the request with the caller\'s X-Request-Id and writes the same log line as Express', async () => {
    lines.length = 0;
    const body = { ...creds, token: 'not-a-jwt' };
    const fast = await app.http.send('/api/sso/validate', { method: 'POST', body, headers: { 'x-request-id': 'fast-1' } });
    const express = await app.http.send('/api/sso/validate?via=express', { method: 'POST', body, headers: { 'x-request-id': 'express-1' } });
    expect(fast.headers['x-request-id']).toBe('fast-1');
    expect(express.headers['x-request-id']).toBe('express-1');
    const lineOf = (id: string) => lines.find((l) => l.req?.id === id);
    const [a, b] = [lineOf('fast-1'), lineOf('express-1')];
    expect(a, 'a log line for the fast path').toBeTruthy();
    expect(b, 'a log line for the Express path').toBeTruthy();
    const shape = (l: Record<string, any>) => ({ ...l, time: 0, pid: 0, responseTime: 0, req: { ...l.req, id: '', url: l.req.url.split('?')[0] } });
    expect(shape(a!)).toStrictEqual(shape(b!));
    expect(a!.res.statusCode).toBe(401);
    // and for the provider's introspection
    const introspect = form({ token: 'x' });
    await app.http.send('/oidc/token/introspection', { method: 'POST', ...introspect, headers: { ...introspect.headers, 'x-request-id': 'fast-2' } });
    await app.http.send('/oidc/token/introspection?via=express', { method: 'POST', ...introspect, headers: { ...introspect.headers, 'x-request-id': 'express-2' } });
    const [c, d] = [lineOf('fast-2'), lineOf('express-2')];
    expect(c && d, 'a log line for each').toBeTruthy();
    expect(shape(c!)).toStrictEqual(shape(d!));
    expect(c!.req.url).toBe('/oidc/token/introspection');
  });

  it('times both under the route pattern, one metric series, and leaves none in flight', async () => {
    const labels = { method: 'POST', route: '/api/sso/validate', status: '401' };
    const scrape = async () => parsePrometheus((await app.metrics.get('/metrics')).text);
    const before = await scrape();
    await bothWays('/api/sso/validate', () => json({ ...creds, token: 'not-a-jwt' }));
    await bothWays('/api/sso/validate', () => raw('{"client_id":'));
    const after = await scrape();
    expect(sampleValue(after, 'http_request_duration_seconds_count', labels) - sampleValue(before, 'http_request_duration_seconds_count', labels)).toBe(2);
    // a body refused before the route is entered counts as unmatched either way, as in Express
    const unmatched = { method: 'POST', route: 'unmatched', status: '400' };
    expect(sampleValue(after, 'http_request_duration_seconds_count', unmatched) - sampleValue(before, 'http_request_duration_seconds_count', unmatched)).toBe(2);
    expect(sampleValue(after, 'http_requests_in_flight'), 'only the scrape itself').toBe(sampleValue(before, 'http_requests_in_flight'));
  });

  it('leaves every other route, and the hot ones written another way, to Express', async () => {
    const before = routerEntered;
    expect((await app.http.get('/healthz')).status).toBe(200);
    expect((await app.http.post('/api/sso/validate/', { ...creds, token: 'not-a-jwt' })).status).toBe(401);
    expect((await app.http.send('/api/sso/validate', { method: 'GET' })).status).toBe(404);
    expect((await app.http.send('/api/sso/validate', { method: 'PUT', body: { ...creds, token: 'not-a-jwt' } })).status).toBe(404);
    expect((await app.http.send('/api/sso/validate', { method: 'OPTIONS' })).status).toBe(200);
    expect((await app.http.post('/API/SSO/VALIDATE', { ...creds, token: 'not-a-jwt' })).status).toBe(401);
    // the provider's other endpoints, and its token endpoints written another way
    expect((await app.http.get('/oidc/jwks')).status).toBe(200);
    expect((await app.http.send('/oidc/token/introspection/', { method: 'POST', ...form({ token: 'x' }) })).status).toBe(200);
    expect(routerEntered - before).toBe(8);
  });
});

describe('the fast path under a rate limit', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ RATE_LIMIT_VALIDATE_PER_MIN: '1', RATE_LIMIT_TOKEN_PER_MIN: '1' });
  });
  afterAll(() => app.close());

  it('shares the counter with the Express chain and refuses alike once it is spent', async () => {
    const client = await makeClient(app);
    const creds = { client_id: client.client_id, client_secret: client.client_secret };
    const first = await app.http.post('/api/sso/validate', { ...creds, token: 'not-a-jwt' });
    expect(first.status).toBe(401);
    const express = await app.http.post('/api/sso/validate?via=express', { ...creds, token: 'not-a-jwt' });
    const fast = await app.http.post('/api/sso/validate', { ...creds, token: 'not-a-jwt' });
    expect(fast.status).toBe(429);
    expect(comparable(fast)).toStrictEqual(comparable(express));
    expect(fast.headers['retry-after']).toMatch(/^\d+$/);
    expect(fast.headers.ratelimit).toMatch(/r=0/);
  });
});
