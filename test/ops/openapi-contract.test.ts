import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SESSION_COOKIE } from '../../src/http/session.ts';
import { buildOpenApiDocument, openApiPath } from '../../src/openapi/document.ts';
import { ROUTES } from '../../src/routes/index.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import type { HttpResponse } from '../helpers/http.ts';
import { ROOT } from '../helpers/processes.ts';

const ALL = ROUTES;
const doc = JSON.parse(JSON.stringify(buildOpenApiDocument(ROUTES)));

const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);

/** Fails unless `res` is documented for `method path`: its status, JSON content, and body schema. */
function expectDocumented(method: string, path: string, res: HttpResponse) {
  const where = `${method.toUpperCase()} ${path} ${res.status}`;
  const documented = doc.paths[openApiPath(path)]?.[method]?.responses?.[String(res.status)];
  expect(documented, `${where} is documented`).toBeTruthy();
  expect(res.headers['content-type'] as string, where).toMatch(/^application\/json/);
  const schema = documented.content?.['application/json']?.schema;
  expect(schema, `${where} documents a JSON body`).toBeTruthy();
  const validate = ajv.compile({ ...schema, components: doc.components });
  expect(validate(res.body), `${where}: ${JSON.stringify(res.body)} ${ajv.errorsText(validate.errors)}`).toBe(true);
}

describe('API reference: the cross-cutting contract (docs/contract.md, "The API reference")', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  it('passes Redocly\'s recommended rules with no error (npm run lint:openapi)', async () => {
    const run = await promisify(execFile)('scripts/lint-openapi.sh', [], { cwd: ROOT, env: { ...process.env, REDOCLY_FORMAT: 'summary' } })
      .then((r) => ({ code: 0, out: r.stdout + r.stderr }), (e) => ({ code: e.code as number, out: `${e.stdout}${e.stderr}` }));
    expect(run.code, run.out).toBe(0);
    expect(run.out).toMatch(/Your API description is valid/);
  }, 120_000);

  it('names a server and states the security of every operation', () => {
    expect(doc.servers.length > 0 && doc.servers.every((s: { url: string }) => s.url)).toBe(true);
    expect(doc.components.securitySchemes.session).toMatchObject({ type: 'apiKey', in: 'cookie', name: SESSION_COOKIE });
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    const expected: Record<string, unknown[]> = {
      public: [], client: [], 'client+ip': [],
      user: [{ session: [] }, { bearer: [] }], admin: [{ session: [] }, { bearer: [] }],
      page: [{}, { session: [] }], 'page-user': [{ session: [] }], 'page-admin': [{ session: [] }],
    };
    for (const op of ALL) {
      const o = doc.paths[openApiPath(op.path)][op.method];
      expect(o.security, `${op.method} ${op.path} (${op.access})`).toStrictEqual(expected[op.access]);
      if (op.access.startsWith('client')) {
        expect(o['x-client-credentials'], `${op.method} ${op.path}`).toStrictEqual({ in: 'body', fields: ['client_id', 'client_secret'], ipAllowList: op.access === 'client+ip' });
        expect(o.requestBody.content['application/json'].schema.required).toEqual(expect.arrayContaining(['client_id', 'client_secret']));
      }
    }
  });

  it('documents 413 and 415 on every JSON body route, with the bodies the app sends', async () => {
    const jsonRoutes = ALL.filter((o) => o.body && o.bodyType !== 'form');
    expect(jsonRoutes.length > 15).toBe(true);
    for (const op of jsonRoutes) {
      const responses = doc.paths[openApiPath(op.path)][op.method].responses;
      expect(Object.keys(responses), `${op.method} ${op.path}`).toEqual(expect.arrayContaining(['413', ...(op.path.startsWith('/api/') ? ['415'] : [])]));
    }
    const client = await makeClient(app);
    const plain = await app.http.send('/api/sso/token', { method: 'POST', body: 'client_id=x', headers: { 'content-type': 'text/plain' } });
    expect([plain.status, plain.body.error]).toStrictEqual([415, 'unsupported_media_type']);
    expectDocumented('post', '/api/sso/token', plain);
    const big = await app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username: 'x', pad: 'x'.repeat(17 * 1024) });
    expect([big.status, big.body.error]).toStrictEqual([413, 'payload_too_large']);
    expectDocumented('post', '/api/sso/token', big);
    // a cookie-carrying POST that does not say application/json, even without a body
    const logout = await app.http.send('/api/auth/logout', { method: 'POST', headers: { cookie: `${SESSION_COOKIE}=x` } });
    expect(logout.status).toBe(415);
    expectDocumented('post', '/api/auth/logout', logout);
  });

  it('lets error bodies carry the detail fields they are sent with', async () => {
    const admin = await makeUser(app, { role: 'admin' });
    const token = (await app.http.post('/api/login', { username: admin.username, password: admin.password })).body.token;
    const as = { headers: { authorization: `Bearer ${token}` } };
    const create = (allowed_ips: string[]) => app.http.post('/api/admin/clients', { client_name: 'Details', callback_url: 'https://d.example/cb', allowed_ips }, as);

    const invalid = await create(['10.0.0.1', '300.1.1.1']);
    expect([invalid.status, invalid.body.error, invalid.body.invalid]).toStrictEqual([400, 'invalid_allowed_ips', ['300.1.1.1']]);
    expectDocumented('post', '/api/admin/clients', invalid);
    const everything = await create(['0.0.0.0/0']);
    expect([everything.status, everything.body.error, everything.body.entries]).toStrictEqual([400, 'allow_everything_unconfirmed', ['0.0.0.0/0']]);
    expectDocumented('post', '/api/admin/clients', everything);
    const details = await app.http.post('/api/admin/clients', { client_name: '' }, as);
    expect([details.status, details.body.error, Array.isArray(details.body.details)]).toStrictEqual([400, 'validation_error', true]);
    expectDocumented('post', '/api/admin/clients', details);
    const wrong = await app.http.post('/api/login', { username: admin.username, password: 'not the password' });
    expect([wrong.status, typeof wrong.body.attempts_remaining]).toStrictEqual([401, 'number']);
    expectDocumented('post', '/api/login', wrong);
  });
});
