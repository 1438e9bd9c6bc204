import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';

/** Signs a form session in at /login as `user`. */
async function signInPage(app: TestApp, user: { username: string; password: string }) {
  const s = formSession(app.app);
  const page = await s.get('/login');
  const res = await s.post('/login', { _csrf: hiddenField(page.text, '_csrf'), step: 'password', login: user.username, password: user.password });
  expect(res.status).toBe(303);
  return s;
}

describe('admin panel over HTTP', () => {
  let app: TestApp;
  let adminUser: Awaited<ReturnType<typeof makeUser>>;
  let client: Awaited<ReturnType<typeof makeClient>>;
  let webhookId: number;
  beforeAll(async () => {
    app = await startTestApp();
    adminUser = await makeUser(app, { role: 'admin' });
    client = await makeClient(app);
    webhookId = (await app.services.webhooks.register({ url: 'http://127.0.0.1:9/hook', events: ['user.login'], secret: 'sixteen-chars-secret' }, { via: 'cli' })).id;
  });
  afterAll(() => app?.close());

  const pages = () => ['/admin', '/admin/clients', `/admin/clients/${client.client_id}`, `/admin/clients/${client.client_id}/regenerate`,
    '/admin/users', '/admin/users/new', `/admin/users/${adminUser.id}`, '/admin/webhooks', `/admin/webhooks/${webhookId}`, '/admin/audit'];
  const forms = () => ['/admin/clients', `/admin/clients/${client.client_id}`, `/admin/clients/${client.client_id}/active`, `/admin/clients/${client.client_id}/regenerate`,
    '/admin/users', `/admin/users/${adminUser.id}`, `/admin/users/${adminUser.id}/active`, `/admin/users/${adminUser.id}/unlock`, `/admin/users/${adminUser.id}/reset-2fa`,
    '/admin/webhooks', `/admin/webhooks/${webhookId}/active`, `/admin/webhooks/${webhookId}/delete`];

  it('renders every admin page for an administrator, no-store', async () => {
    const s = await signInPage(app, adminUser);
    for (const path of pages()) {
      const res = await s.get(path);
      expect(res.status, path).toBe(200);
      expect(res.headers['cache-control'], path).toBe('no-store');
      expect(res.text, path).toMatch(/<nav class="admin-nav"/);
    }
  });

  it('sends a visitor who is not signed in to the sign-in page, which comes back to the admin page', async () => {
    const s = formSession(app.app);
    for (const path of pages()) {
      const res = await s.get(path);
      expect(res.status, path).toBe(303);
      expect(res.headers.location).toBe(`/login?next=${encodeURIComponent(path)}`);
    }
    const login = await s.get('/login?next=%2Fadmin%2Fclients');
    const done = await s.post('/login', { _csrf: hiddenField(login.text, '_csrf'), step: 'password', login: adminUser.username, password: adminUser.password, next: '/admin/clients' });
    expect(done.headers.location).toBe('/admin/clients');
  });

  it('refuses a signed-in non-admin with a 403 page on every page and form, changing nothing', async () => {
    const member = await makeUser(app);
    const s = await signInPage(app, member);
    const csrf = hiddenField((await s.get('/dashboard')).text, '_csrf');
    for (const path of pages()) {
      const res = await s.get(path);
      expect(res.status, path).toBe(403);
      expect(res.text).toMatch(/administrators only/);
    }
    for (const path of forms()) {
      const res = await s.post(path, { _csrf: csrf, active: 'false', confirm: 'on', client_name: 'x', callback_url: 'https://x.example/', url: 'https://x.example/', secret: 'x'.repeat(20), events: 'user.login', email: 'x@example.com', role: 'admin', username: 'zz', password: 'long enough' });
      expect(res.status, path).toBe(403);
    }
    expect((await app.services.clients.findClient(client.client_id))?.active).toBe(true);
    expect((await app.db.query('SELECT 1 FROM webhooks WHERE id = $1 AND active', [webhookId])).rowCount).toBe(1);
  });

  it('refuses every admin form without the CSRF token', async () => {
    const s = await signInPage(app, adminUser);
    for (const path of forms()) {
      const res = await s.post(path, { active: 'false', confirm: 'on', client_name: 'x', callback_url: 'https://x.example/' });
      expect(res.status, path).toBe(403);
      expect(res.text).toMatch(/expired or did not come from this site/);
    }
    expect((await app.services.clients.findClient(client.client_id))?.active).toBe(true);
    expect((await app.db.query('SELECT 1 FROM webhooks WHERE id = $1', [webhookId])).rowCount).toBe(1);
  });

  it('answers hostile input on the pages without a server error', async () => {
    const s = await signInPage(app, adminUser);
    // NUL characters are refused at the edge, before any handler, as bad input
    expect((await s.get('/admin/clients/a%00b')).status).toBe(400);
    expect((await s.get('/admin/users?q=a%00b')).status).toBe(400);
    expect((await s.get('/admin/audit?action=%00')).status).toBe(400);
    expect((await s.get('/admin/audit?from=not-a-date')).status).toBe(400);
    // a valid JavaScript date PostgreSQL cannot hold is a bad filter, not a database error
    expect((await s.get('/admin/audit?from=-004800-01-01')).status).toBe(400);
    expect((await s.get('/admin/audit?to=%2B010000-01-01')).status).toBe(400);
    expect((await s.get('/admin/audit?to=9999-12-31')).status).toBe(200);
    const csrf = hiddenField((await s.get('/admin/clients')).text, '_csrf');
    const refused = await s.post('/admin/clients', { _csrf: csrf, client_name: 'a\u0000b', callback_url: 'https://x.example/' });
    expect(refused.status).toBe(400);
    expect(refused.text).toMatch(/must not contain NUL characters/);
  });

  it('takes the audit page\'s own form, pager and export links, and refuses an unknown key or a malformed address on the page', async () => {
    const s = await signInPage(app, adminUser);
    const action = `test.panel.${Date.now()}`;
    await app.db.query(
      `INSERT INTO audit_log (action, outcome, username, ip_address, details) SELECT $1, 'success', 'u' || g, '10.1.2.3', '{}' FROM generate_series(1, 51) AS g`,
      [action],
    );
    // what the browser sends for the form: every field, the empty ones too
    const first = await s.get(`/admin/audit?user=&client_id=&action=${action}&outcome=&ip=10.1.2.3&from=&to=`);
    expect(first.status, first.text.slice(0, 300)).toBe(200);
    const links = (rel: RegExp) => [...first.text.matchAll(/href="([^"]*)"/g)].map((m) => m[1].replace(/&amp;/g, '&')).filter((h) => rel.test(h));
    const [older] = links(/^\/admin\/audit\?.*cursor=/);
    expect(older, 'a link to the older entries').toBeTruthy();
    const second = await s.get(older);
    expect(second.status, older).toBe(200);
    expect(second.text).toMatch(/« Newest/);
    const exports = links(/^\/api\/admin\/audit\?/);
    expect(exports).toHaveLength(2);
    for (const href of exports) {
      const res = await s.get(href);
      expect(res.status, href).toBe(200);
      expect(res.text.trim().split('\n').length, href).toBeGreaterThanOrEqual(51);
    }
    for (const [path, problem] of [[`/admin/audit?action=${action}&user[]=x`, /Unrecognized key: &#34;user\[\]&#34;/],
      ['/admin/audit?ip=notanip', /must be an IPv4 or IPv6 address/], ['/admin/audit?ip=10.1.2.0%2F24', /ranges \(CIDR\) are not supported/]] as const) {
      const res = await s.get(path);
      expect(res.status, path).toBe(400);
      expect(res.text, path).toMatch(problem);
      expect(res.text, path).not.toMatch(/data-audit-id=/);
    }
  });

  it('drops a one-time secret that was not shown on its page at the next admin page', async () => {
    const s = await signInPage(app, adminUser);
    const csrf = hiddenField((await s.get('/admin/clients')).text, '_csrf');
    const created = await s.post('/admin/clients', { _csrf: csrf, client_name: 'Lost Tab', callback_url: 'https://lost.example/cb', allowed_ips: '127.0.0.1' });
    expect(created.status).toBe(303);
    const detail = String(created.headers.location);
    expect(detail).toMatch(/^\/admin\/clients\/lost-tab-/);
    await s.get('/admin/users'); // the browser went elsewhere instead of following the redirect
    const later = await s.get(detail);
    expect(later.status).toBe(200);
    expect(later.text, 'the secret is gone').not.toMatch(/data-secret/);
    const sessions = await app.db.query<{ sess: unknown }>('SELECT sess FROM sessions');
    expect(!sessions.rows.some((r) => JSON.stringify(r.sess).includes('revealedSecret')), 'and not kept in any session').toBeTruthy();
  });

  it('shows the overview counts', async () => {
    const s = await signInPage(app, adminUser);
    await app.http.post('/api/auth/login', { login: adminUser.username, password: 'wrong password' });
    const html = (await s.get('/admin')).text;
    const stat = (name: string) => Number(html.match(new RegExp(`data-stat="${name}">(\\d+)<`))?.[1]);
    const users = await app.db.query<{ n: number }>('SELECT count(*)::int AS n FROM users');
    expect(stat('users')).toBe(users.rows[0].n);
    expect(stat('clients') >= 1).toBeTruthy();
    expect(stat('failed_logins_24h') >= 1).toBeTruthy();
    expect(stat('lockouts_24h')).toBe(0);
  });
});
