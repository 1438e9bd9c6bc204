import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { admin } from '../helpers/cli.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { hiddenField } from '../pages/form-session.ts';
import { apiSession, claimsOf, dashboardUser, flashOf, linkAudit } from './support.ts';

describe('administrators approve and revoke dashboard links (API, panel, command line)', () => {
  let app: TestApp;
  let http: TestApp['http'];
  beforeAll(async () => {
    app = await startTestApp();
    http = app.http;
  });
  afterAll(() => app.close());

  /** A user with a pending link at a fresh client, signed in on the dashboard. */
  async function pendingLink(name: string) {
    const client = await makeClient(app, { name: `System ${name}` });
    const user = await makeUser(app);
    const dashboard = await dashboardUser(app, user.username, user.password);
    await dashboard.link(client.client_id, name);
    return { client, user, dashboard };
  }

  it('approves over the admin API: the linked name appears; revoking stops it at once, unused tokens included', async () => {
    const { client, user, dashboard } = await pendingLink('api.name');
    const { user: boss, as } = await apiSession(app, 'admin');

    const listed = await http.get(`/api/admin/links?status=pending&client_id=${client.client_id}`, as);
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body).toStrictEqual([expect.objectContaining({ user_id: user.id, username: user.username, client_id: client.client_id, client_name: client.client_name, external_username: 'api.name', status: 'pending' })]);

    const approved = await http.post(`/api/admin/users/${user.id}/links/${client.client_id}/approve`, undefined, as);
    expect(approved.status, approved.text).toBe(200);
    expect(approved.body).toMatchObject({ status: 'active', confirmed_by: 'admin', external_username: 'api.name' });
    const token = await dashboard.signIn(client.client_id);
    expect(claimsOf(token).username).toBe('api.name');
    const detail = await http.get(`/api/admin/users/${user.id}`, as);
    expect(detail.body.linked_clients).toStrictEqual([expect.objectContaining({ client_id: client.client_id, external_username: 'api.name', status: 'active', confirmed_by: 'admin' })]);

    const revoked = await http.delete(`/api/admin/users/${user.id}/links/${client.client_id}`, as);
    expect(revoked.status, revoked.text).toBe(200);
    expect(revoked.body).toMatchObject({ revoked: { external_username: 'api.name', status: 'active' }, invalidated_tokens: 1 });
    const late = await http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token });
    expect([late.status, late.body.error], 'the token issued before the revocation').toStrictEqual([401, 'token_revoked']);
    // the launcher still opens the system, under the user's own name
    const after = await dashboard.session.post('/dashboard/sign-in', { _csrf: hiddenField(await dashboard.page(), '_csrf'), client_id: client.client_id });
    const claims = JSON.parse(Buffer.from(new URL(after.headers.location!).searchParams.get('token')!.split('.')[1], 'base64url').toString());
    expect(claims.username, 'no link any more: the own name').toBe(user.username);

    const again = await http.delete(`/api/admin/users/${user.id}/links/${client.client_id}`, as);
    expect([again.status, again.body.error]).toStrictEqual([404, 'link_not_found']);
    const audit = await linkAudit(app, user.id);
    expect(audit.map((a) => [a.action, a.details.via, a.details.actor])).toStrictEqual([
      ['user.link_client', 'page', undefined],
      ['user.link_confirm', 'admin_api', boss.username],
      ['user.link_revoke', 'admin_api', boss.username],
    ]);
  });

  it('refuses the link API to non-administrators and changes nothing', async () => {
    const { client, user } = await pendingLink('guarded.name');
    const { as } = await apiSession(app, 'user');
    for (const [method, path] of [
      ['GET', '/api/admin/links'],
      ['POST', `/api/admin/users/${user.id}/links/${client.client_id}/approve`],
      ['DELETE', `/api/admin/users/${user.id}/links/${client.client_id}`],
    ] as const) {
      const answer = await http.send(path, { method, headers: as.headers });
      expect(answer.status, `${method} ${path}`).toBe(403);
    }
    expect((await http.get('/api/admin/links')).status).toBe(401);
    const row = await app.db.query('SELECT status FROM user_client_links WHERE user_id = $1', [user.id]);
    expect(row.rows).toStrictEqual([{ status: 'pending' }]);
  });

  it('approves, lists and revokes from the command line, audited as the CLI', async () => {
    const { client, user, dashboard } = await pendingLink('cli.name');
    const listed = await admin(app, ['link', 'list', '--status', 'pending', '--client', client.client_id, '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout)).toStrictEqual([expect.objectContaining({ username: user.username, external_username: 'cli.name', status: 'pending' })]);

    const approved = await admin(app, ['link', 'approve', user.username.toUpperCase(), client.client_id]);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toMatch(/is cli\.name at .* \(active\)/);
    expect(claimsOf(await dashboard.signIn(client.client_id)).username).toBe('cli.name');

    const revoked = await admin(app, ['link', 'revoke', user.username, client.client_id, '--json']);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(JSON.parse(revoked.stdout).revoked.external_username).toBe('cli.name');
    const none = await admin(app, ['link', 'revoke', user.username, client.client_id]);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/has no link/);
    const bad = await admin(app, ['link', 'list', '--status', 'maybe']);
    expect(bad.code).toBe(2);
    const unknown = await admin(app, ['link', 'approve', 'nobody-here', client.client_id]);
    expect([unknown.code, unknown.stderr.trim()]).toStrictEqual([1, 'No user nobody-here']);

    const audit = await linkAudit(app, user.id);
    expect(audit.slice(1).map((a) => [a.action, a.details.via])).toStrictEqual([['user.link_confirm', 'cli'], ['user.link_revoke', 'cli']]);
  });

  it('approves and revokes in the admin panel, from the users page and the user\'s page', async () => {
    const first = await pendingLink('panel.one');
    const second = await pendingLink('panel.two');
    const boss = await makeUser(app, { role: 'admin' });
    const panel = await dashboardUser(app, boss.username, boss.password);
    const s = panel.session;

    const users = await s.get('/admin/users');
    expect(users.status).toBe(200);
    expect(users.text).toMatch(/Links awaiting approval/);
    expect(users.text).toContain(`data-pending-link="${first.user.id}:${first.client.client_id}"`);
    const csrf = hiddenField(users.text, '_csrf');

    const approve = await s.post(`/admin/users/${first.user.id}/links/${first.client.client_id}/approve`, { _csrf: csrf, external_username: 'panel.one', return_to: '/admin/users' });
    expect([approve.status, approve.headers.location]).toStrictEqual([303, '/admin/users']);
    const after = await s.get('/admin/users');
    expect(flashOf(after.text)).toMatch(/Approved: tokens for .* now name panel\.one/);
    expect(after.text).not.toContain(`data-pending-link="${first.user.id}:`);
    expect(claimsOf(await first.dashboard.signIn(first.client.client_id)).username).toBe('panel.one');

    const detail = await s.get(`/admin/users/${second.user.id}`);
    expect(detail.text).toMatch(/data-link-status="pending"/);
    expect(detail.text).toMatch(/aria-label="Approve panel\.two at System panel\.two"/);
    const noCsrf = await s.post(`/admin/users/${second.user.id}/links/${second.client.client_id}/revoke`, {});
    expect(noCsrf.status).toBe(403);
    const revoke = await s.post(`/admin/users/${second.user.id}/links/${second.client.client_id}/revoke`, { _csrf: csrf });
    expect([revoke.status, revoke.headers.location]).toStrictEqual([303, `/admin/users/${second.user.id}`]);
    expect(flashOf((await s.get(`/admin/users/${second.user.id}`)).text)).toMatch(/Revoked: panel\.two/);
    const gone = await s.post(`/admin/users/${second.user.id}/links/${second.client.client_id}/revoke`, { _csrf: csrf });
    expect(gone.status).toBe(303);
    expect(flashOf((await s.get(`/admin/users/${second.user.id}`)).text)).toMatch(/has no link/);
    const signIn = await second.dashboard.session.post('/dashboard/sign-in', { _csrf: hiddenField(await second.dashboard.page(), '_csrf'), client_id: second.client.client_id });
    const token = new URL(signIn.headers.location!).searchParams.get('token')!;
    expect(JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).username, 'no link any more: the own name').toBe(second.user.username);

    expect((await linkAudit(app, first.user.id)).at(-1)).toMatchObject({ action: 'user.link_confirm', details: { via: 'admin_panel', actor: boss.username } });
    expect((await linkAudit(app, second.user.id)).at(-1)).toMatchObject({ action: 'user.link_revoke', details: { via: 'admin_panel', actor: boss.username, status: 'pending' } });
  });
});
