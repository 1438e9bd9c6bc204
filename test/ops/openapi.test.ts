import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Express } from 'express';
import { buildOpenApiDocument, inputSchema, openApiPath } from '../../src/openapi/document.ts';
import { OPERATIONS } from '../../src/openapi/operations.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { request } from '../helpers/http.ts';

/** `method path` of every route mounted on the app, walking nested routers. */
function mountedRoutes(app: Express): string[] {
  const out: string[] = [];
  const walk = (stack: any[], prefix: string) => {
    for (const layer of stack) {
      if (layer.route) {
        for (const method of Object.keys(layer.route.methods)) if (method !== '_all') out.push(`${method} ${prefix}${layer.route.path}`);
      } else if (Array.isArray(layer.handle?.stack)) {
        assert.equal(typeof layer.rawPath, 'string', 'a router mounted on a pattern: teach mountedRoutes about it');
        walk(layer.handle.stack, layer.slash ? prefix : prefix + layer.rawPath);
      }
    }
  };
  walk((app as any).router.stack, '');
  return out;
}

describe('API reference (OpenAPI 3.1 and /docs)', () => {
  let app: TestApp;
  let express: Express;
  before(async () => {
    app = await startTestApp();
    express = app.server.listeners('request').find((l: any) => typeof l === 'function' && 'router' in l) as unknown as Express;
  });
  after(() => app.close());

  it('documents every route the app mounts, and only those', async () => {
    const mounted = mountedRoutes(express);
    assert.ok(mounted.length > 20, `found the routes: ${mounted.join(', ')}`);
    const documented = OPERATIONS.map((o) => `${o.method} ${o.path}`);
    assert.deepEqual(mounted.filter((r) => !documented.includes(r)), [], 'mounted but missing from src/openapi/operations.ts');
    assert.deepEqual(documented.filter((r) => !mounted.includes(r)), [], 'documented but not mounted');
    assert.equal(new Set(documented).size, documented.length, 'no operation twice');

    const doc = (await app.http.get('/api/openapi.json')).body;
    assert.equal(doc.openapi, '3.1.0');
    for (const route of mounted) {
      const [method, path] = route.split(' ');
      assert.ok(doc.paths[openApiPath(path)]?.[method], `${route} is in /api/openapi.json`);
    }
  });

  it('serves the document built from the request schemas', async () => {
    const served = (await app.http.get('/api/openapi.json')).body;
    assert.deepEqual(served, JSON.parse(JSON.stringify(buildOpenApiDocument())));
    const token = served.paths['/api/sso/token'].post.requestBody.content['application/json'].schema;
    assert.deepEqual(token, inputSchema(OPERATIONS.find((o) => o.path === '/api/sso/token')!.body!));
    assert.deepEqual(token.required, ['client_id', 'client_secret', 'username']);
    assert.equal(served.paths['/api/webhooks/{id}'].delete.parameters[0].name, 'id');
    assert.equal(JSON.stringify(served).includes('$defs'), false, 'named schemas live in components');
  });

  it('has examples that validate against their schemas', () => {
    let checked = 0;
    for (const op of OPERATIONS) {
      if (op.body) {
        assert.notEqual(op.example, undefined, `${op.method} ${op.path} has a body example`);
        const parsed = op.body.safeParse(op.example);
        assert.ok(parsed.success, `${op.method} ${op.path} example: ${parsed.error?.message}`);
        checked++;
      }
      for (const [status, r] of Object.entries(op.responses)) {
        if (r.schema && r.example !== undefined) {
          const parsed = r.schema.safeParse(r.example);
          assert.ok(parsed.success, `${op.method} ${op.path} ${status} example: ${parsed.error?.message}`);
          checked++;
        }
      }
    }
    assert.ok(checked > 30);
  });

  it('documents the schemas the routes really validate with: examples pass, empty bodies fail', async () => {
    const member = await makeUser(app);
    const admin = await makeUser(app, { role: 'admin' });
    const bearer = async (u: { username: string; password: string }) =>
      (await app.http.post('/api/login', { username: u.username, password: u.password })).body.token as string;
    const auth = { user: await bearer(member), admin: await bearer(admin) } as Record<string, string>;
    let checked = 0;
    for (const op of OPERATIONS.filter((o) => o.body && o.bodyType !== 'form' && o.path.startsWith('/api/'))) {
      const headers: Record<string, string> = auth[op.access] ? { authorization: `Bearer ${auth[op.access]}` } : {};
      const url = `${app.url}${op.path.replace(/:\w+/g, '999999')}`;
      const ok = await request(url, { method: op.method.toUpperCase(), body: op.example, headers });
      assert.ok(ok.status < 500 && !(ok.status === 400 && ok.body?.error === 'validation_error'), `${op.method} ${op.path} accepts its example (${ok.status} ${ok.text})`);
      const empty = await request(url, { method: op.method.toUpperCase(), body: {}, headers });
      assert.equal(empty.body?.error, 'validation_error', `${op.method} ${op.path} validates with a schema that needs fields`);
      checked++;
    }
    assert.ok(checked >= 13, `checked ${checked} JSON routes`);
  });

  it('renders a readable reference page without external resources', async () => {
    const r = await app.http.get('/docs');
    assert.equal(r.status, 200);
    assert.match(r.headers['content-type'] as string, /^text\/html/);
    for (const op of OPERATIONS) assert.ok(r.text.includes(`<code>${openApiPath(op.path)}</code>`), `${op.path} on the page`);
    assert.match(r.text, /<table class="docs__table">/);
    assert.equal(/(src|href)="(https?:)?\/\//.test(r.text), false, 'nothing loaded from another origin');
    assert.equal((await app.http.get('/assets/css/docs.css')).status, 200);
  });
});
