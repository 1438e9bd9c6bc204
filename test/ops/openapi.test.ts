import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Express } from 'express';
import { buildOpenApiDocument, inputSchema, openApiPath } from '../../src/openapi/document.ts';
import { ROUTES } from '../../src/routes/index.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { request } from '../helpers/http.ts';

const ALL = ROUTES;

/** `method path` of every route mounted on the app, walking nested routers. */
function mountedRoutes(app: Express): string[] {
  const out: string[] = [];
  const walk = (stack: any[], prefix: string) => {
    for (const layer of stack) {
      if (layer.route) {
        for (const method of Object.keys(layer.route.methods)) if (method !== '_all') out.push(`${method} ${prefix}${layer.route.path}`);
      } else if (Array.isArray(layer.handle?.stack)) {
        expect(typeof layer.rawPath, 'a router mounted on a pattern: teach mountedRoutes about it').toBe('string');
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
  beforeAll(async () => {
    app = await startTestApp();
    express = app.app;
  });
  afterAll(() => app.close());

  it('documents every route the app mounts, and only those', async () => {
    const mounted = mountedRoutes(express);
    expect(mounted.length > 20, `found the routes: ${mounted.join(', ')}`).toBeTruthy();
    const documented = ALL.map((o) => `${o.method} ${o.path}`);
    expect(mounted.filter((r) => !documented.includes(r)), 'mounted but missing from src/openapi/operations.ts').toStrictEqual([]);
    expect(documented.filter((r) => !mounted.includes(r)), 'documented but not mounted').toStrictEqual([]);
    expect(new Set(documented).size, 'no operation twice').toBe(documented.length);

    const doc = (await app.http.get('/api/openapi.json')).body;
    expect(doc.openapi).toBe('3.1.0');
    for (const route of mounted) {
      const [method, path] = route.split(' ');
      expect(doc.paths[openApiPath(path)]?.[method], `${route} is in /api/openapi.json`).toBeTruthy();
    }
  });

  it('mounts routes only from declarations: no router is built by hand anywhere in src/', () => {
    const handBuilt: string[] = [];
    const walk = (dir: string) => {
      for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
        const file = path.join(dir, entry.name);
        if (entry.isDirectory()) walk(file);
        else if (file.endsWith('.ts') && !file.endsWith(path.join('routes', 'mount.ts'))) {
          const text = fs.readFileSync(file, 'utf8');
          if (/\bRouter\(\)|\.(get|post|put|patch|delete|all)\(\s*['"`]\//.test(text)) handBuilt.push(path.relative(process.cwd(), file));
        }
      }
    };
    walk(path.resolve('src'));
    expect(handBuilt, 'declare endpoints with route() in the capability\'s routes.ts and list them in src/routes/index.ts').toStrictEqual([]);
  });

  it('serves the document built from the request schemas', async () => {
    const served = (await app.http.get('/api/openapi.json')).body;
    expect(served).toStrictEqual(JSON.parse(JSON.stringify(buildOpenApiDocument(ROUTES))));
    const token = served.paths['/api/sso/token'].post.requestBody.content['application/json'].schema;
    expect(token).toStrictEqual(inputSchema(ALL.find((o) => o.path === '/api/sso/token')!.body!));
    expect(token.required).toStrictEqual(['client_id', 'client_secret', 'username']);
    expect(served.paths['/api/webhooks/{id}'].delete.parameters[0].name).toBe('id');
    expect(JSON.stringify(served).includes('$defs'), 'named schemas live in components').toBe(false);
  });

  it('has examples that validate against their schemas', () => {
    let checked = 0;
    for (const op of ALL) {
      if (op.body) {
        expect(op.example, `${op.method} ${op.path} has a body example`).not.toBe(undefined);
        const parsed = op.body.safeParse(op.example);
        expect(parsed.success, `${op.method} ${op.path} example: ${parsed.error?.message}`).toBeTruthy();
        checked++;
      }
      for (const [status, r] of Object.entries(op.responses)) {
        if (r.schema && r.example !== undefined) {
          const parsed = r.schema.safeParse(r.example);
          expect(parsed.success, `${op.method} ${op.path} ${status} example: ${parsed.error?.message}`).toBeTruthy();
          checked++;
        }
      }
    }
    expect(checked > 30).toBeTruthy();
  });

  it('documents the schemas the routes really validate with: examples pass, empty bodies fail', async () => {
    const member = await makeUser(app);
    const admin = await makeUser(app, { role: 'admin' });
    const bearer = async (u: { username: string; password: string }) =>
      (await app.http.post('/api/login', { username: u.username, password: u.password })).body.token as string;
    const auth = { user: await bearer(member), admin: await bearer(admin) } as Record<string, string>;
    let checked = 0;
    for (const op of ALL.filter((o) => o.body && o.bodyType !== 'form' && o.path.startsWith('/api/'))) {
      const headers: Record<string, string> = auth[op.access] ? { authorization: `Bearer ${auth[op.access]}` } : {};
      const url = `${await app.listen()}${op.path.replace(/:\w+/g, '999999')}`;
      const ok = await request(url, { method: op.method.toUpperCase(), body: op.example, headers });
      expect(ok.status < 500 && !(ok.status === 400 && ok.body?.error === 'validation_error'), `${op.method} ${op.path} accepts its example (${ok.status} ${ok.text})`).toBeTruthy();
      // an optional body is all optional fields; a wrong one must still be refused
      const empty = await request(url, { method: op.method.toUpperCase(), body: op.bodyOptional ? { no_such_field: true } : {}, headers });
      expect(empty.body?.error, `${op.method} ${op.path} validates with a schema that needs fields`).toBe('validation_error');
      checked++;
    }
    expect(checked >= 13, `checked ${checked} JSON routes`).toBeTruthy();
  });

  it('serves the reference page: Redoc from this service, the document, nothing from another origin', async () => {
    const r = await app.http.get('/docs');
    expect(r.status).toBe(200);
    expect(r.headers['content-type'] as string).toMatch(/^text\/html/);
    expect(r.text).toContain('src="/assets/vendor/redoc.standalone.js"');
    expect(r.text).toContain('data-spec="/api/openapi.json"');
    expect(/(src|href)="(https?:)?\/\//.test(r.text), 'nothing loaded from another origin').toBe(false);
    expect(String(r.headers['content-security-policy'])).toMatch(/script-src 'self';.*worker-src blob:/);
    const bundle = await app.http.get('/assets/vendor/redoc.standalone.js');
    expect(bundle.status).toBe(200);
    expect(bundle.headers['content-type'] as string).toMatch(/javascript/);
    expect(bundle.text).toContain('Redoc');
    expect(bundle.text).not.toContain('cdn.redoc.ly');
    for (const asset of ['/assets/css/docs.css', '/assets/js/docs.js']) expect((await app.http.get(asset)).status, asset).toBe(200);
  });
});
