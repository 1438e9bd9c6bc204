import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { type SignedIn, signedIn } from './support.ts';

/**
 * docs/administration.md: every change writes an audit row with the acting
 * administrator in `details` (`actor`, `actor_user_id`, `via`), and the request's IP address and
 * user agent. The user_id/username columns name whom the change is about.
 */
describe('the acting administrator in the audit entry of every admin change', () => {
  let app: TestApp;
  let admin: SignedIn;
  beforeAll(async () => {
    app = await startTestApp();
    admin = await signedIn(app, 'admin');
  });
  afterAll(() => app?.close());

  it('names the administrator, the request and, for a new user, the role and active flag given', async () => {
    const as = { headers: { ...admin.as.headers, 'user-agent': 'audit-check/1' } };
    const since = (await app.db.query<{ n: string }>('SELECT coalesce(max(id), 0)::text AS n FROM audit_log')).rows[0].n;
    const username = unique('subject');
    const created = await app.http.post('/api/admin/users', { username, email: `${username}@example.com`, password: 'a long enough passphrase', role: 'admin' }, as);
    expect(created.status, created.text).toBe(201);
    const id = created.body.id as number;
    expect((await app.http.patch(`/api/admin/users/${id}`, { password: 'another long passphrase 42' }, as)).status).toBe(200);
    expect((await app.http.post('/api/auth/login', { login: username, password: 'a wrong passphrase' })).status).toBe(401); // something to unlock
    expect((await app.http.post(`/api/admin/users/${id}/unlock`, undefined, as)).status).toBe(200);
    const hook = await app.http.post('/api/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['user.login'], secret: 'sixteen-chars-secret!' }, as);
    expect(hook.status, hook.text).toBe(201);
    expect((await app.http.patch(`/api/webhooks/${hook.body.id}`, { events: ['user.login', 'user.locked'] }, as)).status).toBe(200);
    expect((await app.http.delete(`/api/webhooks/${hook.body.id}`, as)).status).toBe(204);
    expect((await app.http.get('/api/admin/audit?format=ndjson&action=user.unlock', as)).status).toBe(200);

    const rows = (await app.db.query<{ action: string; ip_address: string | null; user_agent: string | null; details: any }>(
      `SELECT action, ip_address, user_agent, details FROM audit_log WHERE id > $1::bigint AND details->>'via' = 'admin_api' ORDER BY id`, [since],
    )).rows.map((r) => ({ ...r, details: typeof r.details === 'string' ? JSON.parse(r.details) : r.details }));
    expect(rows.map((r) => r.action), JSON.stringify(rows)).toStrictEqual(['user.create', 'user.password_set', 'user.logout', 'user.unlock', 'webhook.create', 'webhook.update', 'webhook.delete', 'audit.export']);
    const without = rows.filter((r) => r.details.actor !== admin.user.username || r.details.actor_user_id !== admin.user.id || r.user_agent !== 'audit-check/1' || !r.ip_address)
      .map((r) => `${r.action}: ${JSON.stringify(r.details)} ip=${r.ip_address} ua=${r.user_agent}`);
    expect(without, 'entries without the acting administrator or the request').toStrictEqual([]);
    expect(rows[0].details, 'creating an administrator is a grant of the role').toMatchObject({ role: 'admin', active: true });
  });
});
