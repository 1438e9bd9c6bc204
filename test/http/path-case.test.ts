import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logging/logger.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient } from '../helpers/factories.ts';
import type { HttpResponse } from '../helpers/http.ts';

/** helmet's headers that only a browser rendering a page acts on (test/http/api-headers.test.ts). */
const PAGE_ONLY = ['x-frame-options', 'referrer-policy', 'cross-origin-opener-policy', 'x-dns-prefetch-control'];
const API_CSP = "default-src 'none'; frame-ancestors 'none'";
const BROWSER = { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' };

/** An answer of the API: a JSON error body with the given code and the API's header set, never the page's. */
function expectApiAnswer(res: HttpResponse, status: number, error: string | undefined, what: string) {
  expect(res.status, `${what}: ${res.text.slice(0, 200)}`).toBe(status);
  expect(res.headers['content-type'], what).toMatch(/^application\/json/);
  if (error) expect(res.body?.error, what).toBe(error);
  expect(res.headers['content-security-policy'], what).toBe(API_CSP);
  expect(res.headers['x-content-type-options'], what).toBe('nosniff');
  for (const header of PAGE_ONLY) expect(res.headers[header], `${what}: ${header}`).toBe(undefined);
}

/** A page: HTML with helmet's page headers. */
function expectPage(res: HttpResponse, status: number, what: string) {
  expect(res.status, what).toBe(status);
  expect(res.headers['content-type'], what).toMatch(/^text\/html/);
  expect(res.headers['x-frame-options'], what).toBe('DENY');
  expect(String(res.headers['content-security-policy']), what).toMatch(/script-src 'self'/);
}

/*
 * Express routes paths in any letter case and with one trailing slash: /API/SSO/TOKEN reaches
 * the token route. Whatever Express serves as the API must be answered as the API (JSON errors,
 * the API's headers), even to a browser that prefers HTML (src/http/api-paths.ts).
 */
describe('a path written in another letter case is answered as Express routes it', () => {
  let app: TestApp;
  const lines: Array<Record<string, any>> = [];
  beforeAll(async () => {
    const sink = new Writable({ write(chunk, _enc, done) { lines.push(JSON.parse(String(chunk))); done(); } });
    app = await startTestApp({ LOG_LEVEL: 'info' }, { logger: createLogger('info', sink) });
  });
  afterAll(() => app.close());

  it('answers API errors to a browser as JSON with the API headers, on every route Express reaches that way', async () => {
    const client = await makeClient(app);
    const badClient = { client_id: client.client_id, client_secret: 'wrong', username: 'nobody' };
    const cases: Array<[string, () => Promise<HttpResponse>, number, string]> = [
      ['token issue, bad client', () => app.http.post('/API/SSO/TOKEN', badClient, { headers: BROWSER }), 401, 'invalid_client'],
      ['validation, mixed case, trailing slash', () => app.http.post('/Api/Sso/Validate/', { ...badClient, token: 'x' }, { headers: BROWSER }), 401, 'invalid_client'],
      ['legacy validation, body of another type', () => app.http.send('/API/VALIDATE-TOKEN', { method: 'POST', body: 'token=x', headers: { ...BROWSER, 'content-type': 'text/plain' } }), 415, 'unsupported_media_type'],
      ['token issue, malformed JSON', () => app.http.send('/API/SSO/TOKEN', { method: 'POST', body: '{"client_id":', headers: { ...BROWSER, 'content-type': 'application/json' } }), 400, 'invalid_json'],
      ['the profile without a session', () => app.http.get('/API/USER', { headers: BROWSER }), 401, 'unauthenticated'],
      ['an unknown API path', () => app.http.get('/API/no/such/thing', { headers: BROWSER }), 404, 'not_found'],
      ['the API root', () => app.http.get('/API', { headers: BROWSER }), 404, 'not_found'],
    ];
    for (const [what, send, status, error] of cases) expectApiAnswer(await send(), status, error, what);
  });

  it('gives the probes the API headers in any letter case, and logs their polling at debug', async () => {
    for (const path of ['/HEALTHZ', '/Healthz/', '/ReadyZ']) {
      const res = await app.http.get(path, { headers: BROWSER });
      expectApiAnswer(res, 200, undefined, path);
      await new Promise((resolve) => setTimeout(resolve, 20)); // the line is written on 'finish'
      expect(lines.filter((l) => l.req?.id === res.headers['x-request-id']), `${path}: no info line`).toStrictEqual([]);
    }
  });

  it('answers pages with an error page and the page headers, paths that only begin like the API included', async () => {
    for (const path of ['/no/such/page', '/apis', '/api-docs', '/healthzz']) {
      expectPage(await app.http.get(path, { headers: BROWSER }), 404, path);
    }
    expectPage(await app.http.get('/LOGIN', { headers: BROWSER }), 200, '/LOGIN');
  });
});
