import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildOpenApiDocument } from '../../src/openapi/document.ts';
import { ROUTES } from '../../src/routes/index.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import type { HttpResponse, RequestOptions } from '../helpers/http.ts';
import { parsePrometheus, sampleValue } from '../ops/helpers/prometheus.ts';

const DEPRECATION = 'true';
const LINK = '</api/sso/validate>; rel="successor-version"';

/** The legacy route's mark, which docs/api.md promises on all of its answers. */
function expectMarked(res: HttpResponse, status: number, error: string | undefined, what: string) {
  expect(res.status, `${what}: ${res.text.slice(0, 200)}`).toBe(status);
  if (error) expect(res.body?.error, what).toBe(error);
  expect(res.headers.deprecation, `${what}: Deprecation`).toBe(DEPRECATION);
  expect(res.headers.link, `${what}: Link`).toBe(LINK);
}

/*
 * POST /api/validate-token answers carry Deprecation and Link whichever step answers: the
 * app-wide JSON check and body parser (before any route), the route's guards and limit, the
 * handler. Each case is sent to the exact path (the fast path, src/routes/fast-path.ts), with a
 * query string and in capitals (both through Express's router).
 */
const WAYS = ['/api/validate-token', '/api/validate-token?via=express', '/API/VALIDATE-TOKEN'];

describe('the legacy /api/validate-token marks every answer as deprecated', () => {
  let app: TestApp;
  let creds: { client_id: string; client_secret: string };
  let username: string;
  beforeAll(async () => {
    app = await startTestApp();
    const client = await makeClient(app, { allowedIps: ['127.0.0.1', '::1'] });
    creds = { client_id: client.client_id, client_secret: client.client_secret };
    username = (await makeUser(app)).username;
  });
  afterAll(() => app.close());

  const issue = async () => (await app.http.post('/api/sso/token', { ...creds, username })).body.token as string;
  const raw = (text: string, type = 'application/json'): RequestOptions => ({ body: text, headers: { 'content-type': type } });

  const cases: Array<[string, () => Promise<RequestOptions> | RequestOptions, number, string | undefined]> = [
    ['a valid token', async () => ({ body: { ...creds, token: await issue() } }), 200, undefined],
    ['malformed JSON', () => raw('{"client_id":'), 400, 'invalid_json'],
    ['a body of another type', () => raw('token=x', 'application/x-www-form-urlencoded'), 415, 'unsupported_media_type'],
    ['a body over 16 KiB', () => ({ body: { ...creds, token: 'x'.repeat(17_000) } }), 413, 'payload_too_large'],
    ['a NUL character (the app-wide text guard)', () => ({ body: { ...creds, token: 'a\u0000b' } }), 400, 'validation_error'],
    ['a missing field (the route\'s schema)', () => ({ body: { client_id: creds.client_id } }), 400, 'validation_error'],
    ['a wrong client secret', () => ({ body: { ...creds, client_secret: 'wrong', token: 'x' } }), 401, 'invalid_client'],
    ['a refused token', () => ({ body: { ...creds, token: 'not-a-jwt' } }), 401, 'invalid_token'],
    ['a caller outside the allow list', () => ({ body: { ...creds, token: 'not-a-jwt' }, localAddress: '127.0.0.2' }), 403, 'ip_not_allowed'],
  ];

  it.each(cases)('on %s', async (what, make, status, error) => {
    for (const path of WAYS) expectMarked(await app.http.send(path, { method: 'POST', ...(await make()) }), status, error, `${what} to ${path}`);
  });

  it('says so on each answer in the API reference', () => {
    const responses = (buildOpenApiDocument(ROUTES) as any).paths['/api/validate-token'].post.responses as Record<string, { headers?: Record<string, { schema: { const?: string } }> }>;
    expect(Object.keys(responses)).toEqual(expect.arrayContaining(['200', '400', '401', '403', '413', '415', '429', '500', '503']));
    for (const [status, r] of Object.entries(responses)) {
      expect(r.headers?.Deprecation?.schema.const, status).toBe(DEPRECATION);
      expect(r.headers?.Link?.schema.const, status).toBe(LINK);
    }
  });

  it('still counts a body refused before the route as unmatched, either way', async () => {
    const scrape = async () => parsePrometheus((await app.metrics.get('/metrics')).text);
    const count = (samples: ReturnType<typeof parsePrometheus>, route: string) =>
      sampleValue(samples, 'http_request_duration_seconds_count', { method: 'POST', route, status: '400' });
    const before = await scrape();
    for (const path of WAYS) await app.http.send(path, { method: 'POST', ...raw('{"client_id":') });
    const after = await scrape();
    expect(count(after, 'unmatched') - count(before, 'unmatched')).toBe(WAYS.length);
    expect(count(after, '/api/validate-token') - count(before, '/api/validate-token')).toBe(0);
  });
});

describe('the legacy /api/validate-token under its rate limit', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ RATE_LIMIT_VALIDATE_PER_MIN: '1' });
  });
  afterAll(() => app.close());

  it('marks the 429 as deprecated too', async () => {
    const client = await makeClient(app);
    const body = { client_id: client.client_id, client_secret: client.client_secret, token: 'not-a-jwt' };
    expectMarked(await app.http.post('/api/validate-token', body), 401, 'invalid_token', 'within the limit');
    for (const path of WAYS) {
      const res = await app.http.post(path, body);
      expectMarked(res, 429, 'rate_limited', path);
      expect(res.headers['retry-after'], path).toMatch(/^\d+$/);
    }
  });
});
