import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { request } from '../helpers/http.ts';

/** Hostile and broken input on the API answers 4xx JSON with DESIGN.md's codes, never a 500. */
describe('API input hardening', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(() => app.close());

  const post = (path: string, body: unknown, headers: Record<string, string> = {}) => request(app.url + path, { method: 'POST', body, headers });

  for (const path of ['/api/sso/token', '/api/sso/validate', '/api/validate-token']) {
    it(`${path}: malformed JSON is 400 invalid_json`, async () => {
      const r = await post(path, '{"client_id": ', { 'content-type': 'application/json' });
      assert.equal(r.status, 400);
      assert.equal(r.body.error, 'invalid_json');
      assert.equal(typeof r.body.message, 'string');
    });

    it(`${path}: wrong types and missing fields are 400 validation_error with details`, async () => {
      for (const body of [{}, { client_id: 1, client_secret: [], username: {}, token: 5 }, [], 'null', '"text"', '42']) {
        const r = typeof body === 'string' ? await post(path, body, { 'content-type': 'application/json' }) : await post(path, body);
        assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
        assert.equal(r.body.error, 'validation_error');
        assert.ok(Array.isArray(r.body.details) && r.body.details.length > 0);
      }
    });

    it(`${path}: a 1 MB body is 413 and a non-JSON content type 415`, async () => {
      const big = await post(path, JSON.stringify({ client_id: 'x'.repeat(1024 * 1024) }), { 'content-type': 'application/json' });
      assert.equal(big.status, 413);
      assert.equal(big.body.error, 'payload_too_large');
      const form = await post(path, 'client_id=a&client_secret=b', { 'content-type': 'application/x-www-form-urlencoded' });
      assert.equal(form.status, 415);
      assert.equal(form.body.error, 'unsupported_media_type');
      const none = await post(path, 'client_id=a');
      assert.equal(none.status, 415);
    });
  }

  it('an unknown /api route is 404 not_found in JSON', async () => {
    const r = await app.http.get('/api/no/such/route');
    assert.equal(r.status, 404);
    assert.equal(r.body.error, 'not_found');
  });

  it('a bad ip_address field is a validation error', async () => {
    const r = await post('/api/sso/token', { client_id: 'a', client_secret: 'b', username: 'c', ip_address: 'not-an-ip' });
    assert.equal(r.status, 400);
    assert.equal(r.body.error, 'validation_error');
  });

  it('never answers with a stack trace', async () => {
    const r = await post('/api/sso/validate', '{"token":', { 'content-type': 'application/json' });
    assert.equal(/at .*\.ts:\d+/.test(r.text), false);
  });
});

describe('text the database cannot store', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(() => app.close());

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
        assert.equal(r.status, 400, `${path} ${JSON.stringify(body)}: ${r.text}`);
        assert.equal(r.body.error, 'validation_error');
      }
    });
  }

  it('refuses a NUL in the query string and the path of pages', async () => {
    assert.equal((await app.http.get('/sso/login?client_id=a%00b')).status, 400);
    assert.equal((await app.http.get('/api/admin/clients/a%00b')).status, 400);
  });
});

describe('cross-site requests with cookies', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(() => app.close());

  it('refuses a cookie-carrying POST to the API that a cross-site form could send', async () => {
    // what <form method=post> on another site sends: cookies, no JSON content type
    for (const headers of [{ cookie: 'auth.sid=anything' } as Record<string, string>, { cookie: 'auth.sid=anything', 'content-type': 'application/x-www-form-urlencoded' }, { cookie: 'auth.sid=anything', 'content-type': 'text/plain' }]) {
      const r = await request(`${app.url}/api/auth/logout`, { method: 'POST', headers });
      assert.equal(r.status, 415, JSON.stringify(headers));
      assert.equal(r.body.error, 'unsupported_media_type');
    }
    const sameOrigin = await request(`${app.url}/api/auth/logout`, { method: 'POST', headers: { cookie: 'auth.sid=anything', 'content-type': 'application/json' } });
    assert.equal(sameOrigin.status, 200);
    const noCookie = await request(`${app.url}/api/auth/logout`, { method: 'POST' });
    assert.equal(noCookie.status, 200, 'server-to-server callers without cookies are unaffected');
  });
});
