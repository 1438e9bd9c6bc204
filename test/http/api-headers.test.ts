import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';

/** helmet's headers that only a browser rendering a page acts on. */
const PAGE_ONLY = [
  'cross-origin-opener-policy', 'cross-origin-resource-policy', 'origin-agent-cluster', 'referrer-policy',
  'x-dns-prefetch-control', 'x-download-options', 'x-frame-options', 'x-permitted-cross-domain-policies', 'x-xss-protection',
];

describe('response headers of API answers', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  it('gives token issue and validation a short fixed set: nosniff, no-store, a request id, no page headers', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const creds = { client_id: client.client_id, client_secret: client.client_secret };
    const issued = await app.http.post('/api/sso/token', { ...creds, username: user.username });
    const validated = await app.http.post('/api/sso/validate', { ...creds, token: issued.body.token });
    const refused = await app.http.post('/api/sso/validate', { ...creds, token: issued.body.token });
    const badClient = await app.http.post('/api/sso/validate', { ...creds, client_secret: 'wrong', token: issued.body.token });
    for (const [name, res] of Object.entries({ issued, validated, refused, badClient })) {
      expect(res.status, name).toBe({ issued: 200, validated: 200, refused: 401, badClient: 401 }[name]);
      expect(res.headers['x-content-type-options'], name).toBe('nosniff');
      expect(res.headers['cache-control'], name).toBe('no-store');
      expect(res.headers['content-type'], name).toMatch(/^application\/json/);
      expect(res.headers['x-request-id'], name).toBeTruthy();
      expect(res.headers['content-security-policy'], name).toBe("default-src 'none'; frame-ancestors 'none'");
      for (const header of PAGE_ONLY) expect(res.headers[header], `${name}: ${header}`).toBe(undefined);
    }
  });

  it('sends the same set on an unknown API path and on the probes', async () => {
    for (const path of ['/api/no/such/thing', '/healthz']) {
      const res = await app.http.get(path);
      expect(res.headers['x-content-type-options'], path).toBe('nosniff');
      for (const header of PAGE_ONLY) expect(res.headers[header], `${path}: ${header}`).toBe(undefined);
    }
  });

  it('keeps helmet\'s page headers on pages', async () => {
    for (const path of ['/login', '/docs', '/no/such/page']) {
      const res = await app.http.get(path);
      expect(res.headers['x-frame-options'], path).toBe('DENY');
      expect(res.headers['referrer-policy'], path).toBe('no-referrer');
      expect(String(res.headers['content-security-policy']), path).toMatch(/script-src 'self'/);
    }
  });
});
