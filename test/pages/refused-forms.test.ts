import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyRoute } from '../../src/routes/declare.ts';
import { ROUTES } from '../../src/routes/index.ts';
import { formPageOf } from '../../src/routes/mount.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { send } from '../helpers/http.ts';
import { startLoggedApp, type LoggedApp } from '../ops/helpers/logged-app.ts';
import { formSession, hiddenField } from './form-session.ts';

/**
 * Every page form, as the route declarations list them, refuses a form token that is wrong
 * (tampered, missing, another session's, with a NUL in it) and a form posted after its session
 * ended, in the same way: 403 with the page's message, or for a form of a signed-in page a 303
 * to the sign-in page that comes back to the form's page; never a 5xx, never an error logged.
 * (A scanner's tampered tokens, sent without the session, used to reach the forms' error
 * pages, which render the signed-in user's page: a TypeError and a 500 on the security page
 * and an administrator's user page.)
 */
const CSRF_MESSAGE = 'This form has expired or did not come from this site';

describe('refused form tokens and ended sessions on every page form', () => {
  let app: LoggedApp;
  let ids: Record<string, string>;
  let admin: { username: string; password: string };
  let clientId: string;
  let forms: AnyRoute[];

  beforeAll(async () => {
    app = await startLoggedApp();
    admin = await makeUser(app, { role: 'admin' });
    const target = await makeUser(app);
    clientId = (await makeClient(app)).client_id;
    ids = { id: String(target.id), client_id: clientId, delivery: '00000000-0000-0000-0000-000000000000' };
    forms = ROUTES.filter((r) => r.method === 'post' && r.bodyType === 'form' && (!r.when || r.when(app.services as never)));
  });
  afterAll(() => app.close());

  /**
   * The OpenID Connect sign-in form exists only for a live authorization request: for the id
   * this walk makes up, the interaction is unknown, which is refused first (400, "expired"),
   * before any form token is read (test/oidc covers its forms with a real request).
   */
  const unknownInteraction = (route: AnyRoute, r: { status: number; text: string }) =>
    route.path === '/oidc/interaction/:uid' && r.status === 400 && r.text.includes('This sign-in has expired');
  const pathOf = (route: AnyRoute) => route.path.replace(/:(\w+)/g, (_m, name: string) => ids[name] ?? '1');
  /** The declared example, with what the sign-in form needs to get as far as its token check. */
  const fieldsOf = (route: AnyRoute): Record<string, string | string[]> => ({
    ...(route.example as Record<string, string | string[]> | undefined),
    ...(route.path === '/sso/login' ? { client_id: clientId } : {}),
  });

  /** An administrator's browser, signed in, with the token its pages carry. */
  async function signedInBrowser() {
    const s = formSession(app.app);
    const login = await s.get('/login');
    const r = await s.post('/login', { _csrf: hiddenField(login.text, '_csrf'), step: 'password', login: admin.username, password: admin.password });
    expect(r.status, r.text.slice(0, 200)).toBe(303);
    const page = await s.get('/account/security');
    return { s, csrf: hiddenField(page.text, '_csrf') };
  }

  /** The token with its last three characters changed: one that already ended in `abc` (one in 4,096) would be sent as it was, and accepted. */
  const tampered = (t: string) => `${t.slice(0, -3)}${t.endsWith('abc') ? 'abd' : 'abc'}`;

  function errorsLogged(): string[] {
    return app.entries().filter((e) => e.level >= 50).map((e) => `${e.req?.method ?? ''} ${e.req?.url ?? e.path ?? ''}: ${e.msg} ${e.err?.message ?? ''}`);
  }

  it('the declarations list the forms of every page', () => {
    const paths = forms.map((r) => r.path);
    for (const p of ['/login', '/sso/login', '/account/security/totp/setup', '/account/security/totp/enable', '/admin/users/:id', '/account/sessions/end-all']) {
      expect(paths).toContain(p);
    }
  });

  it('a tampered, missing or other session\'s token answers 403 with the form\'s message, signed in', async () => {
    const other = formSession(app.app);
    const otherToken = hiddenField((await other.get('/login')).text, '_csrf');
    const wrong: string[] = [];
    for (const route of forms) {
      for (const [kind, token] of [['tampered', tampered], ['missing', () => undefined], ['another session\'s', () => otherToken]] as const) {
        const { s, csrf } = await signedInBrowser();
        const sent = token(csrf);
        const r = await s.post(pathOf(route), { ...fieldsOf(route), ...(sent === undefined ? {} : { _csrf: sent }) });
        if (unknownInteraction(route, r)) continue;
        if (r.status !== 403 || !r.text.includes(CSRF_MESSAGE)) wrong.push(`${route.path} (${kind}): ${r.status} ${r.text.slice(0, 120)}`);
      }
    }
    expect(wrong).toStrictEqual([]);
    expect(errorsLogged()).toStrictEqual([]);
  });

  it('a form posted after its session ended goes to sign in (back to the form\'s page), or answers 403', async () => {
    const wrong: string[] = [];
    for (const route of forms) {
      const { s, csrf } = await signedInBrowser();
      const cookies = new Map(s.cookies);
      expect((await s.get('/sso/logout')).status).toBe(200);
      // the open page's browser posts with the cookie it had
      for (const [k, v] of cookies) s.cookies.set(k, v);
      const r = await s.post(pathOf(route), { ...fieldsOf(route), _csrf: csrf });
      if (route.access === 'page-user' || route.access === 'page-admin') {
        const page = formPageOf(route, ROUTES)?.replace(/:(\w+)/g, (_m, name: string) => ids[name] ?? '1');
        const expected = page && page !== '/dashboard' ? `/login?next=${encodeURIComponent(page)}` : '/login';
        if (r.status !== 303 || r.headers.location !== expected) wrong.push(`${route.path}: ${r.status} ${r.headers.location ?? ''} (expected 303 ${expected})`);
      } else if (!unknownInteraction(route, r) && (r.status !== 403 || !r.text.includes(CSRF_MESSAGE))) {
        wrong.push(`${route.path}: ${r.status} ${r.text.slice(0, 120)}`);
      }
    }
    expect(wrong).toStrictEqual([]);
    expect(errorsLogged()).toStrictEqual([]);
  });

  it('a token with a NUL in it, with the session or without, is refused without a 5xx or an error logged', async () => {
    const { s } = await signedInBrowser();
    const cookie = [...s.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const wrong: string[] = [];
    for (const route of forms) {
      for (const who of ['anonymous', 'signed in'] as const) {
        const body = new URLSearchParams(Object.entries(fieldsOf(route)).flatMap(([k, v]) => ([] as string[]).concat(v).map((x) => [k, x])));
        body.set('_csrf', 'a\0b');
        const r = await send(app.app, pathOf(route), {
          method: 'POST', body: body.toString(),
          headers: { accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded', ...(who === 'signed in' ? { cookie } : {}) },
        });
        if (r.status >= 500) wrong.push(`${route.path} (${who}): ${r.status}`);
      }
    }
    expect(wrong).toStrictEqual([]);
    expect(errorsLogged()).toStrictEqual([]);
  });

  it('a sign-in from the page a form sent to sign in returns to that page', async () => {
    const { s, csrf } = await signedInBrowser();
    const cookies = new Map(s.cookies);
    await s.get('/sso/logout');
    for (const [k, v] of cookies) s.cookies.set(k, v);
    const refused = await s.post(`/admin/users/${ids.id}/unlock`, { _csrf: csrf });
    expect(refused.headers.location).toBe(`/login?next=${encodeURIComponent(`/admin/users/${ids.id}`)}`);
    const form = await s.get(refused.headers.location!);
    const r = await s.post('/login', {
      _csrf: hiddenField(form.text, '_csrf'), next: hiddenField(form.text, 'next'), step: 'password', login: admin.username, password: admin.password,
    });
    expect(r.status, r.text.slice(0, 200)).toBe(303);
    expect(r.headers.location).toBe(`/admin/users/${ids.id}`);
  });
});
