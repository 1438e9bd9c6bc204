import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';
import { panelSession } from './support.ts';

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

  it('says what a setting means in words on every admin page, never the setting\'s name (PASSWORD_MIN_LENGTH)', async () => {
    const s = await panelSession(app, adminUser);
    for (const path of pages()) {
      const text = (await s.get(path)).text.replace(/<script[\s\S]*?<\/script>|<[^>]+>/g, ' ');
      expect(text.match(/\b[A-Z]{2,}(?:_[A-Z0-9]+)+\b/g) ?? [], path).toStrictEqual([]);
    }
  });

  it('renders every admin page for an administrator, no-store', async () => {
    const s = await panelSession(app, adminUser);
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
    const s = await panelSession(app, member);
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
    const s = await panelSession(app, adminUser);
    for (const path of forms()) {
      const res = await s.post(path, { active: 'false', confirm: 'on', client_name: 'x', callback_url: 'https://x.example/' });
      expect(res.status, path).toBe(403);
      expect(res.text).toMatch(/expired or did not come from this site/);
    }
    expect((await app.services.clients.findClient(client.client_id))?.active).toBe(true);
    expect((await app.db.query('SELECT 1 FROM webhooks WHERE id = $1', [webhookId])).rowCount).toBe(1);
  });

  it('answers a form about a client, user or webhook that does not exist with the error page, leaving no message for a later page', async () => {
    const s = await panelSession(app, adminUser);
    const csrf = hiddenField((await s.get('/admin/webhooks')).text, '_csrf');
    for (const [path, status] of [['/admin/clients/nonexist/active', 404], ['/admin/clients/nonexist/regenerate', 404], ['/admin/clients/nonexist', 404], ['/admin/users/999999999/active', 404],
      ['/admin/users/abc/unlock', 400], ['/admin/users/999999999/password', 404], ['/admin/users/999999999/links/nonexist/revoke', 404],
      ['/admin/webhooks/999999999/active', 404], ['/admin/webhooks/x/delete', 400]] as const) {
      const res = await s.post(path, { _csrf: csrf, active: 'false', confirm: 'on', grace_seconds: '0', password: 'a long enough passphrase 2931' });
      expect(res.status, path).toBe(status);
      expect(res.headers['content-type'], path).toMatch(/text\/html/);
      const later = await s.get('/admin/webhooks');
      expect(later.text, `${path}: no message left for a later page`).not.toMatch(/class="alert alert--/);
    }
    // the regenerate confirmation of a client that does not exist: 404, as the reference says (test/helpers/contract.ts)
    expect((await s.get('/admin/clients/nonexist/regenerate')).status).toBe(404);
    // a refusal about something else on a page that exists still goes back there with the reason
    const stale = await s.post(`/admin/users/${adminUser.id}/links/nonexist/revoke`, { _csrf: csrf });
    expect(stale.status).toBe(303);
    expect(stale.headers.location).toBe(`/admin/users/${adminUser.id}`);
    expect((await s.get(stale.headers.location!)).text).toMatch(/has no link at nonexist/);
  });

  it('answers hostile input on the pages without a server error', async () => {
    const s = await panelSession(app, adminUser);
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
    // refused at the form parser, before the guard: the app's error page, which needs nobody signed in
    expect(refused.text).toMatch(/holds text that cannot be stored/);
  });

  it('takes the audit page\'s own form, pager and export links, and refuses an unknown key or a malformed address on the page', async () => {
    const s = await panelSession(app, adminUser);
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

  it('shows a new or regenerated secret in the answer to its form, no-store, and never writes it to the session', async () => {
    const s = await panelSession(app, adminUser);
    const sessionsHold = async (secret: string) => JSON.stringify((await app.db.query<{ sess: unknown }>('SELECT sess FROM sessions')).rows).includes(secret);
    const shown = (page: { text: string }) => page.text.match(/id="client-secret" type="text" readonly value="([A-Za-z0-9_-]{43})"/)?.[1];
    const csrf = hiddenField((await s.get('/admin/clients')).text, '_csrf');
    const created = await s.post('/admin/clients', { _csrf: csrf, client_name: 'Closed Tab', callback_url: 'https://closed.example/cb', allowed_ips: '127.0.0.1' });
    expect(created.status, created.text.slice(0, 300)).toBe(200);
    expect(created.headers['cache-control']).toBe('no-store');
    const secret = shown(created);
    expect(secret, 'the secret is on the page the form answers with').toBeTruthy();
    const clientId = created.text.match(/data-field="client_id">([^<]+)</)?.[1] ?? '';
    expect(clientId).toMatch(/^closed-tab-/);
    expect(created.text, 'the page asks to be remembered at the client\'s own address').toContain(`data-shown-at="/admin/clients/${clientId}"`);
    await app.services.clients.authenticateClient(clientId, secret!);
    expect(await sessionsHold(secret!), 'the plain secret is in no session row').toBe(false);
    const [audit] = (await app.db.query<{ details: unknown }>("SELECT details FROM audit_log WHERE action = 'client.create' AND client_id = $1", [clientId])).rows;
    expect(JSON.stringify(audit.details)).toContain('admin_panel');
    expect((await s.get(`/admin/clients/${clientId}`)).text, 'the client\'s page shows it no more').not.toMatch(/data-secret/);

    const confirm = await s.get(`/admin/clients/${clientId}/regenerate`);
    const regenerated = await s.post(`/admin/clients/${clientId}/regenerate`, { _csrf: hiddenField(confirm.text, '_csrf'), grace_seconds: '0' });
    expect(regenerated.status).toBe(200);
    expect(regenerated.headers['cache-control']).toBe('no-store');
    const fresh = shown(regenerated);
    expect(fresh).toBeTruthy();
    expect(fresh).not.toBe(secret);
    expect(regenerated.text).toMatch(/previous secret no longer works/);
    expect(regenerated.text, 'the masked secret is the new one').toContain(`••••••••${fresh!.slice(-4)}`);
    expect(await sessionsHold(fresh!)).toBe(false);
    const refused = await s.post(`/admin/clients/${clientId}/regenerate`, { _csrf: 'forged', grace_seconds: '0' });
    expect(refused.status, 'still CSRF-checked').toBe(403);
    expect(shown(refused)).toBeUndefined();
    await app.services.clients.authenticateClient(clientId, fresh!);
  });

  it('a form whose answer shows a new secret, sent twice, does its work once and shows the same secret both times', async () => {
    const s = await panelSession(app, adminUser);
    const shown = (page: { text: string }) => page.text.match(/id="client-secret" type="text" readonly value="([A-Za-z0-9_-]{43})"/)?.[1];
    const list = await s.get('/admin/clients');
    const name = `Clicked Twice ${Date.now()}`;
    const register = { _csrf: hiddenField(list.text, '_csrf'), submission: hiddenField(list.text, 'submission'), client_name: name, callback_url: 'https://twice.example/cb', allowed_ips: '127.0.0.1' };
    // both at once (a double click), as a browser without JavaScript sends them
    const [a, b] = await Promise.all([s.post('/admin/clients', register), s.post('/admin/clients', register)]);
    expect([a.status, b.status], b.text.slice(0, 300)).toStrictEqual([200, 200]);
    expect(shown(a)).toBeTruthy();
    expect(shown(b), 'the answer the browser keeps shows the secret that works').toBe(shown(a));
    const registered = (await app.db.query<{ client_id: string }>('SELECT client_id FROM clients WHERE client_name = $1', [name])).rows;
    expect(registered, 'one client system, not two').toHaveLength(1);
    // the same key with what the form says changed (edited after Back) is another registration
    const edited = await s.post('/admin/clients', { ...register, client_name: `${name} edited` });
    expect(shown(edited)).toBeTruthy();
    expect(shown(edited)).not.toBe(shown(a));
    const clientId = registered[0].client_id;
    await app.services.clients.authenticateClient(clientId, shown(a)!);

    // a rotation with a grace period, sent again after the first answered: a second one would be
    // refused (only one previous secret is kept) and the first's secret never seen
    const confirm = await s.get(`/admin/clients/${clientId}/regenerate`);
    const rotate = { _csrf: hiddenField(confirm.text, '_csrf'), submission: hiddenField(confirm.text, 'submission'), grace_seconds: '3600' };
    const first = await s.post(`/admin/clients/${clientId}/regenerate`, rotate);
    const again = await s.post(`/admin/clients/${clientId}/regenerate`, rotate);
    expect([first.status, again.status], again.text.slice(0, 300)).toStrictEqual([200, 200]);
    expect(shown(again)).toBe(shown(first));
    expect(shown(first)).not.toBe(shown(a));
    await app.services.clients.authenticateClient(clientId, shown(first)!);
    await app.services.clients.authenticateClient(clientId, shown(a)!); // the old one, in its grace period
    const rotations = (await app.db.query("SELECT 1 FROM audit_log WHERE action = 'client.rotate_secret' AND client_id = $1", [clientId])).rowCount;
    expect(rotations, 'one rotation').toBe(1);

    // the form shown anew is a new submission: refused as a second grace rotation is
    const next = await s.get(`/admin/clients/${clientId}/regenerate`);
    const refused = await s.post(`/admin/clients/${clientId}/regenerate`, { ...rotate, submission: hiddenField(next.text, 'submission') });
    expect(refused.status).toBe(303);
    expect((await s.get(refused.headers.location!)).text).toContain('is still accepted until');
  });

  it('saves a user\'s profile form auditing only what changed, and says so when nothing did', async () => {
    const member = await makeUser(app, { fullName: 'Form Name' });
    const s = await panelSession(app, adminUser);
    const csrf = hiddenField((await s.get(`/admin/users/${member.id}`)).text, '_csrf');
    const updates = async () => (await app.db.query<{ details: any }>("SELECT details FROM audit_log WHERE action = 'user.update' AND user_id = $1 ORDER BY id", [member.id]))
      .rows.map((r) => (typeof r.details === 'string' ? JSON.parse(r.details) : r.details));

    const unchanged = await s.post(`/admin/users/${member.id}`, { _csrf: csrf, email: member.email, full_name: 'Form Name', role: 'user' });
    expect(unchanged.status).toBe(303);
    expect((await s.get(unchanged.headers.location!)).text).toMatch(/Nothing changed/);
    expect(await updates(), 'the whole form sent back unchanged writes nothing').toStrictEqual([]);

    const renamed = await s.post(`/admin/users/${member.id}`, { _csrf: csrf, email: member.email, full_name: 'New Form Name', role: 'user' });
    expect((await s.get(renamed.headers.location!)).text).toMatch(/The profile was saved/);
    expect((await updates()).map((d) => d.changed)).toStrictEqual([{ full_name: 'New Form Name' }]);
  });

  it('shows the overview counts', async () => {
    const s = await panelSession(app, adminUser);
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
