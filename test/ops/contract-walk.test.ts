import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROUTES } from '../../src/routes/index.ts';
import type { AnyRoute } from '../../src/routes/declare.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { documentedOperations, seen } from '../helpers/contract.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import type { HttpResponse } from '../helpers/http.ts';

/**
 * Calls every documented operation at least once as each role its access names (anonymous,
 * a signed-in user, an administrator, a client system), with the documented example as body.
 * Every answer goes through the test HTTP helper, which fails on any answer the document does
 * not describe (test/helpers/contract.ts); this walk makes sure every operation is asked.
 */
type Role = 'anonymous' | 'user' | 'admin' | 'client';

const ROLES: Record<AnyRoute['access'], Role[]> = {
  public: ['anonymous'],
  client: ['anonymous', 'client'],
  'client+ip': ['anonymous', 'client'],
  user: ['anonymous', 'user'],
  admin: ['anonymous', 'user', 'admin'],
  page: ['anonymous'],
  'page-user': ['anonymous', 'user'],
  'page-admin': ['anonymous', 'user', 'admin'],
};

describe('the API reference holds for every operation', () => {
  let app: TestApp;
  let ids: Record<string, string>;
  let creds: { client_id: string; client_secret: string };
  let member: { username: string; password: string };
  let admin: { username: string; password: string };

  beforeAll(async () => {
    app = await startTestApp();
    creds = await makeClient(app);
    member = await makeUser(app);
    admin = await makeUser(app, { role: 'admin' });
    const target = await makeUser(app);
    ids = { id: String(target.id), client_id: creds.client_id, delivery: '00000000-0000-0000-0000-000000000000' };
  });
  afterAll(() => app.close());

  /** A fresh session cookie for the role (a walk may end sessions on the way). */
  async function cookieOf(who: { username: string; password: string }): Promise<string> {
    const r = await app.http.post('/api/auth/login', { login: who.username, password: who.password });
    expect(r.status, r.text).toBe(200);
    return String(r.headers['set-cookie']?.[0]).split(';')[0]!;
  }

  async function call(route: AnyRoute, role: Role, extra: Record<string, string> = {}): Promise<HttpResponse> {
    const path = route.path.replace(/:(\w+)/g, (_m, name: string) => encodeURIComponent(ids[name] ?? '1'));
    const headers: Record<string, string> = {};
    if (role === 'user' || role === 'admin') headers.cookie = await cookieOf(role === 'user' ? member : admin);
    let body: unknown;
    if (route.body) {
      const example = (route.example ?? {}) as Record<string, unknown>;
      body = route.access === 'client' || route.access === 'client+ip'
        ? { ...example, ...(role === 'client' ? creds : { client_id: creds.client_id, client_secret: 'not-the-secret' }) }
        : example;
    }
    if (route.bodyType === 'form') {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = new URLSearchParams(Object.entries({ ...(body as Record<string, unknown> | undefined), ...extra }).flatMap(([k, v]) => (Array.isArray(v) ? v : [v]).map((x) => [k, String(x)]))).toString();
    } else if (route.method !== 'get' && route.method !== 'delete') {
      headers['content-type'] = 'application/json';
    }
    return app.http.send(path, { method: route.method.toUpperCase(), body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body), headers });
  }

  it('every operation, as every role it names, answers as documented', async () => {
    const calls: string[] = [];
    // reads before writes, deletions last: a walk that deletes its webhook first learns less
    const order = (r: AnyRoute) => (r.method === 'get' ? 0 : r.method === 'delete' ? 2 : 1);
    const routes = [...ROUTES].filter((r) => !r.when || r.when(app.services as never)).sort((a, b) => order(a) - order(b));
    for (const route of routes) {
      for (const role of ROLES[route.access]) {
        const r = await call(route, role);
        calls.push(`${route.method} ${route.path} as ${role}: ${r.status}`);
        expect(r.status, `${route.method} ${route.path} as ${role}: ${r.text.slice(0, 200)}`).toBeLessThan(500);
        if (route.bodyType === 'form' && route.method === 'post') {
          // a scanner's tampered form token (test/pages/refused-forms.test.ts has the rest)
          const tampered = await call(route, role, { _csrf: 'a\0b' });
          expect(tampered.status, `${route.method} ${route.path} as ${role} with a tampered token: ${tampered.text.slice(0, 200)}`).toBeLessThan(500);
        }
      }
    }
    expect(calls.length).toBeGreaterThan(ROUTES.length);
    const asked = new Set([...seen].map((s) => s.split(' ').slice(0, 2).join(' ')));
    const unasked = documentedOperations().map((o) => `${o.method} ${o.template}`).filter((o) => !asked.has(o));
    expect(unasked, 'documented operations the walk never got a checked answer from').toStrictEqual([]);
  });
});
