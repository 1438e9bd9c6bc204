import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { admin } from '../helpers/cli.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { hiddenField } from '../pages/form-session.ts';
import { apiSession, claimsOf, dashboardUser } from './support.ts';

/**
 * An administrator approves the name they were shown. A user who changes the claim between the
 * page the administrator reads and the click must not get the new, never-reviewed name approved.
 */
describe('approving a dashboard link approves the name the administrator saw', () => {
  let app: TestApp;
  beforeAll(async () => { app = await startTestApp(); });
  afterAll(() => app.close());

  it('in the panel: a name the user swapped in after the page showed the claim is not approved', async () => {
    const client = await makeClient(app, { name: 'Shop' });
    const user = await makeUser(app);
    const dashboard = await dashboardUser(app, user.username, user.password);
    expect(await dashboard.link(client.client_id, 'mallory.shop')).toMatch(/awaiting confirmation/);
    const boss = await makeUser(app, { role: 'admin' });
    const panel = await dashboardUser(app, boss.username, boss.password);
    const list = await panel.session.get('/admin/users');
    expect(list.text).toMatch(/aria-label="Approve mallory\.shop at Shop/);
    const form = { _csrf: hiddenField(list.text, '_csrf'), external_username: hiddenField(list.text, 'external_username'), return_to: '/admin/users' };
    expect(form.external_username).toBe('mallory.shop');

    // meanwhile the user replaces the claim with the client's administrator's name
    expect(await dashboard.link(client.client_id, 'shop-admin')).toMatch(/awaiting confirmation/);
    const refused = await panel.session.post(`/admin/users/${user.id}/links/${client.client_id}/approve`, form);
    expect(refused.status).toBe(303);
    expect((await panel.session.get(refused.headers.location!)).text).toContain('The link&#39;s name is now shop-admin, not mallory.shop');
    expect(claimsOf(await dashboard.signIn(client.client_id)).username, 'a name no administrator was shown is not in tokens').toBe(user.username);

    // the page shown again names the new claim; approving that works
    const again = await panel.session.get('/admin/users');
    const approved = await panel.session.post(`/admin/users/${user.id}/links/${client.client_id}/approve`, { ...form, external_username: hiddenField(again.text, 'external_username') });
    expect(approved.status).toBe(303);
    expect(claimsOf(await dashboard.signIn(client.client_id)).username).toBe('shop-admin');
  });

  it('over the API (external_username) and the command line (--name)', async () => {
    const client = await makeClient(app, { name: 'Shop2' });
    const user = await makeUser(app);
    const dashboard = await dashboardUser(app, user.username, user.password);
    await dashboard.link(client.client_id, 'mallory.two');
    const { as } = await apiSession(app, 'admin');
    const listed = await app.http.get(`/api/admin/links?status=pending&client_id=${client.client_id}`, as);
    expect(listed.body[0].external_username).toBe('mallory.two');
    await dashboard.link(client.client_id, 'shop2-admin');
    const approved = await app.http.post(`/api/admin/users/${user.id}/links/${client.client_id}/approve`, { external_username: 'mallory.two' }, as);
    expect(approved.status).toBe(409);
    expect(approved.body).toMatchObject({ error: 'link_changed' });
    const cli = await admin(app, ['link', 'approve', user.username, client.client_id, '--name', 'mallory.two']);
    expect(cli.code).not.toBe(0);
    expect((await app.http.get(`/api/admin/links?status=pending&client_id=${client.client_id}`, as)).body[0].external_username, 'still pending').toBe('shop2-admin');
    const now = await admin(app, ['link', 'approve', user.username, client.client_id, '--name', 'shop2-admin']);
    expect(now.code, now.stderr).toBe(0);
    expect(claimsOf(await dashboard.signIn(client.client_id)).username).toBe('shop2-admin');
  });
});
