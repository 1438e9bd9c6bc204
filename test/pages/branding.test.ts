import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { insertUserAndClient, makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from './form-session.ts';
import { auditOf, signedIn, type SignedIn } from '../admin/support.ts';

const PNG = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

describe('branding configuration', () => {
  it('takes BRAND_NAME and a local or data: BRAND_LOGO_URL; defaults to "Auth Service" and no logo', () => {
    expect(loadConfig({}).BRAND_NAME).toBe('Auth Service');
    expect(loadConfig({}).BRAND_LOGO_URL).toBe(undefined);
    const c = loadConfig({ BRAND_NAME: 'Northwind Traders', BRAND_LOGO_URL: '/assets/brand/northwind.svg' });
    expect([c.BRAND_NAME, c.BRAND_LOGO_URL]).toStrictEqual(['Northwind Traders', '/assets/brand/northwind.svg']);
    expect(loadConfig({ BRAND_LOGO_URL: PNG }).BRAND_LOGO_URL).toBe(PNG);
  });

  it('refuses at load any logo address that would make a browser contact another site', () => {
    for (const bad of ['https://cdn.example.com/logo.png', 'http://intranet/logo.svg', '//cdn.example.com/logo.png', '/assets/../secret', '/other/logo.svg',
      'javascript:alert(1)', 'data:text/html;base64,PGgxPg==']) {
      expect(() => loadConfig({ BRAND_LOGO_URL: bad }), bad).toThrow(/^Invalid configuration: BRAND_LOGO_URL: must be a path under \/assets\//);
    }
  });
});

describe('client system logos', () => {
  let app: TestApp;
  let admin: SignedIn;
  beforeAll(async () => {
    app = await startTestApp({ BRAND_NAME: 'Northwind Traders' });
    admin = await signedIn(app);
  });
  afterAll(() => app.close());

  it('are set, shown, changed and removed through the admin API, and audited without the image itself', async () => {
    const created = await app.http.post('/api/admin/clients', { client_name: 'Shop', callback_url: 'https://shop.example/cb', logo_url: PNG }, admin.as);
    expect(created.status, created.text).toBe(201);
    expect(created.body.logo_url).toBe(PNG);
    const id = created.body.client_id;
    expect((await app.http.get(`/api/admin/clients/${id}`, admin.as)).body.logo_url).toBe(PNG);

    const refused = await app.http.patch(`/api/admin/clients/${id}`, { logo_url: 'https://cdn.example.com/shop.png' }, admin.as);
    expect(refused.status).toBe(400);
    expect(refused.body.error).toBe('invalid_logo_url');
    const local = await app.http.patch(`/api/admin/clients/${id}`, { logo_url: '/assets/logos/shop.svg' }, admin.as);
    expect(local.body.logo_url).toBe('/assets/logos/shop.svg');
    const removed = await app.http.patch(`/api/admin/clients/${id}`, { logo_url: null }, admin.as);
    expect(removed.status, removed.text).toBe(200);
    expect(removed.body.logo_url).toBe(null);
    await app.http.patch(`/api/admin/clients/${id}`, { logo_url: PNG }, admin.as);
    const changes = (await auditOf(app, 'client.update')).filter((r) => r.client_id === id).map((r) => r.details.changed.logo_url);
    expect(changes).toStrictEqual([`data: image, ${PNG.length} characters`, 'removed', '/assets/logos/shop.svg']);
  });

  it('are refused on registration when not local, and a client inserted by plain SQL simply has none', async () => {
    const bad = await app.http.post('/api/admin/clients', { client_name: 'Bad', callback_url: 'https://bad.example/cb', logo_url: 'https://tracker.example/pixel.gif' }, admin.as);
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('invalid_logo_url');
    const { clientId } = await insertUserAndClient(app.db, unique('plain'));
    expect((await app.http.get(`/api/admin/clients/${clientId}`, admin.as)).body.logo_url).toBe(null);
  });

  it('is shown on the client sign-in page, whose tab title names the client and the organisation', async () => {
    const created = await app.http.post('/api/admin/clients', { client_name: 'Payroll & HR', callback_url: 'https://payroll.example/cb', logo_url: PNG }, admin.as);
    const page = await app.http.get(`/sso/login?client_id=${created.body.client_id}`, { headers: { accept: 'text/html' } });
    expect(page.status).toBe(200);
    expect(page.text).toMatch(/<title>Sign in to Payroll &amp; HR · Northwind Traders<\/title>/);
    expect(page.text).toContain(`<img class="auth__client-logo" src="${PNG}" alt="Payroll &amp; HR"`);
    const own = await app.http.get('/login', { headers: { accept: 'text/html' } });
    expect(own.text).toMatch(/<title>Sign in · Northwind Traders<\/title>/);
    expect(own.text).not.toContain('auth__client-logo');
  });

  it('names the organisation on every sign-in-style card: forgot and reset password, and a must-change sign-in', async () => {
    const brandLine = (html: string) => html.match(/<div class="auth__brand">[\s\S]*?<span>([^<]*)<\/span>/)?.[1];
    const html = { headers: { accept: 'text/html' } };
    expect(brandLine((await app.http.get('/forgot-password', html)).text)).toBe('Northwind Traders');
    expect(brandLine((await app.http.get('/reset-password?token=no-such-link', html)).text)).toBe('Northwind Traders');
    const user = await makeUser(app);
    await app.services.users.setPassword({ username: user.username }, { password: 'temporary but long 2931', mustChange: true }, { via: 'cli' });
    const browser = formSession(await app.listen());
    const login = await browser.get('/login');
    const res = await browser.post('/login', { _csrf: hiddenField(login.text, '_csrf'), step: 'password', login: user.username, password: 'temporary but long 2931' });
    expect(res.headers.location).toBe('/account/password');
    const form = await browser.get('/account/password');
    expect(form.text).toContain('Choose a new password');
    expect(brandLine(form.text)).toBe('Northwind Traders');
  });
});
