import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { hiddenField } from '../pages/form-session.ts';
import { panelSession } from '../admin/support.ts';

/** The panel's access pages: groups, a client's rule with the users it admits, a user's groups and systems. */
describe('access in the admin panel', () => {
  let app: TestApp;
  let boss: Awaited<ReturnType<typeof makeUser>>;
  beforeAll(async () => {
    app = await startTestApp();
    boss = await makeUser(app, { role: 'admin' });
  });
  afterAll(() => app?.close());

  const field = (html: string, name: string) => html.match(new RegExp(`data-field="${name}"[^>]*>([\\s\\S]*?)</`))?.[1].replace(/\s+/g, ' ').trim();

  it('creates a group, restricts a client to it, adds a user, and shows who may use what; each change audited', async () => {
    const s = await panelSession(app, boss);
    const csrf = hiddenField((await s.get('/admin/groups')).text, '_csrf');
    const group = unique('finance-');
    const created = await s.post('/admin/groups', { _csrf: csrf, name: group });
    expect([created.status, created.headers.location]).toStrictEqual([303, '/admin/groups']);
    expect((await s.get('/admin/groups')).text).toContain(`data-group="${group}"`);

    const client = await makeClient(app, { name: 'Billing' });
    const user = await makeUser(app);
    const rule = await s.post(`/admin/clients/${client.client_id}/access`, { _csrf: csrf, allow_groups: `${group}`, allow_roles: '', listed: 'on' });
    expect(rule.status).toBe(303);
    let page = (await s.get(`/admin/clients/${client.client_id}`)).text;
    expect(field(page, 'admitted-users')).toBe('0');
    expect(field(page, 'access-summary')).toContain(`group ${group}`);

    const add = await s.post(`/admin/users/${user.id}/groups`, { _csrf: csrf, group });
    expect([add.status, add.headers.location]).toStrictEqual([303, `/admin/users/${user.id}`]);
    page = (await s.get(`/admin/users/${user.id}`)).text;
    expect(page).toContain(`data-group="${group}"`);
    expect(field(page, 'usable-clients')).toContain('Billing');
    expect(field((await s.get(`/admin/clients/${client.client_id}`)).text, 'admitted-users')).toBe('1');
    expect((await s.get('/admin/clients')).text).toMatch(new RegExp(`group ${group} \\(1\\)`));

    // a group a rule names is kept, with the reason on the page
    const refused = await s.post(`/admin/groups/${group}/delete`, { _csrf: csrf });
    expect(refused.status).toBe(303);
    expect((await s.get('/admin/groups')).text).toMatch(/is named by the access rule of client/);

    const out = await s.post(`/admin/users/${user.id}/groups/remove`, { _csrf: csrf, group });
    expect(out.status).toBe(303);
    expect(field((await s.get(`/admin/users/${user.id}`)).text, 'usable-clients')).not.toContain('Billing');
    const audit = await app.db.query<{ action: string; via: string }>(
      "SELECT action, details->>'via' AS via FROM audit_log WHERE details->>'group' = $1 OR (action = 'client.update' AND client_id = $2) ORDER BY id", [group, client.client_id]);
    expect(audit.rows.map((r) => `${r.action} ${r.via}`)).toStrictEqual(['group.create admin_panel', 'client.update admin_panel', 'user.group_add admin_panel', 'user.group_remove admin_panel']);
  });

  it('refuses the access form without its CSRF token, and an unknown group with the database\'s message', async () => {
    const s = await panelSession(app, boss);
    const client = await makeClient(app);
    expect((await s.post(`/admin/clients/${client.client_id}/access`, { allow_groups: '' })).status).toBe(403);
    const csrf = hiddenField((await s.get(`/admin/clients/${client.client_id}`)).text, '_csrf');
    const bad = await s.post(`/admin/clients/${client.client_id}/access`, { _csrf: csrf, allow_groups: 'no-such-group', allow_roles: '' });
    expect(bad.status).toBe(303);
    expect((await s.get(`/admin/clients/${client.client_id}`)).text).toMatch(/names group &#34;no-such-group&#34;, which does not exist|names group "no-such-group", which does not exist/);
  });
});
