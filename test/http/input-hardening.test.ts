import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { send } from '../helpers/http.ts';

// One instance for the whole file: every test here sends requests that change nothing (or
// only what its own request names), with the default configuration.
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app?.close());

/** Hostile and broken input on the API answers 4xx JSON with the codes of docs/contract.md, never a 500. */
describe('API input hardening', () => {

  const post = (path: string, body: unknown, headers: Record<string, string> = {}) => send(app.app, path, { method: 'POST', body, headers });

  for (const path of ['/api/sso/token', '/api/sso/validate', '/api/validate-token']) {
    it(`${path}: malformed JSON is 400 invalid_json`, async () => {
      const r = await post(path, '{"client_id": ', { 'content-type': 'application/json' });
      expect(r.status).toBe(400);
      expect(r.body.error).toBe('invalid_json');
      expect(typeof r.body.message).toBe('string');
    });

    it(`${path}: wrong types and missing fields are 400 validation_error with details`, async () => {
      for (const body of [{}, { client_id: 1, client_secret: [], username: {}, token: 5 }, [], 'null', '"text"', '42']) {
        const r = typeof body === 'string' ? await post(path, body, { 'content-type': 'application/json' }) : await post(path, body);
        expect(r.status, `${JSON.stringify(body)}: ${r.text}`).toBe(400);
        expect(r.body.error).toBe('validation_error');
        expect(Array.isArray(r.body.details) && r.body.details.length > 0).toBeTruthy();
      }
    });

    it(`${path}: a 1 MB body is 413 and a non-JSON content type 415`, async () => {
      const big = await post(path, JSON.stringify({ client_id: 'x'.repeat(1024 * 1024) }), { 'content-type': 'application/json' });
      expect(big.status).toBe(413);
      expect(big.body.error).toBe('payload_too_large');
      const form = await post(path, 'client_id=a&client_secret=b', { 'content-type': 'application/x-www-form-urlencoded' });
      expect(form.status).toBe(415);
      expect(form.body.error).toBe('unsupported_media_type');
      const none = await post(path, 'client_id=a');
      expect(none.status).toBe(415);
    });
  }

  it('an unknown /api route is 404 not_found in JSON', async () => {
    const r = await app.http.get('/api/no/such/route');
    expect(r.status).toBe(404);
    expect(r.body.error).toBe('not_found');
  });

  it('a bad ip_address field is a validation error', async () => {
    const r = await post('/api/sso/token', { client_id: 'a', client_secret: 'b', username: 'c', ip_address: 'not-an-ip' });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe('validation_error');
  });

  it('never answers with a stack trace', async () => {
    const r = await post('/api/sso/validate', '{"token":', { 'content-type': 'application/json' });
    expect(/at .*\.ts:\d+/.test(r.text)).toBe(false);
  });
});

describe('text the database cannot store', () => {

  const hostile = ['a\u0000b', 'ab\ud800'];

  for (const bad of hostile) {
    const label = JSON.stringify(bad);
    it(`answers 400 validation_error, never 500, for ${label} on the SSO and login routes`, async () => {
      const cases: Array<[string, unknown]> = [
        ['/api/sso/token', { client_id: bad, client_secret: 'x', username: 'u' }],
        ['/api/sso/token', { client_id: 'c', client_secret: 'x', username: bad }],
        ['/api/sso/validate', { client_id: bad, client_secret: 'x', token: 't' }],
        ['/api/validate-token', { client_id: 'c', client_secret: bad, token: 't' }],
        ['/api/sso/logout', { client_id: bad, client_secret: 'x', token: 't' }],
        ['/api/auth/login', { login: bad, password: 'x' }],
        ['/api/login', { username: bad, password: 'x' }],
        ['/api/auth/login', { [bad]: 'key', login: 'a', password: 'b' }],
      ];
      for (const [path, body] of cases) {
        const r = await app.http.post(path, body);
        expect(r.status, `${path} ${JSON.stringify(body)}: ${r.text}`).toBe(400);
        expect(r.body.error).toBe('validation_error');
      }
    });
  }

  it('refuses a NUL in the query string and the path of pages', async () => {
    expect((await app.http.get('/sso/login?client_id=a%00b')).status).toBe(400);
    expect((await app.http.get('/api/admin/clients/a%00b')).status).toBe(400);
  });
});

describe('cross-site requests with cookies', () => {

  it('refuses a cookie-carrying POST to the API that a cross-site form could send', async () => {
    // what <form method=post> on another site sends: cookies, no JSON content type
    for (const headers of [{ cookie: 'auth.sid=anything' } as Record<string, string>, { cookie: 'auth.sid=anything', 'content-type': 'application/x-www-form-urlencoded' }, { cookie: 'auth.sid=anything', 'content-type': 'text/plain' }]) {
      const r = await send(app.app, '/api/auth/logout', { method: 'POST', headers });
      expect(r.status, JSON.stringify(headers)).toBe(415);
      expect(r.body.error).toBe('unsupported_media_type');
    }
    const sameOrigin = await send(app.app, '/api/auth/logout', { method: 'POST', headers: { cookie: 'auth.sid=anything', 'content-type': 'application/json' } });
    expect(sameOrigin.status).toBe(200);
    const noCookie = await send(app.app, '/api/auth/logout', { method: 'POST' });
    expect(noCookie.status, 'server-to-server callers without cookies are unaffected').toBe(200);
  });
});
