import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signIn } from '../auth/support.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { admin as cli } from '../helpers/cli.ts';
import { makeUser } from '../helpers/factories.ts';
import { auditOf, type SignedIn, signedIn } from './support.ts';

/**
 * One administrative change is one decision: applied whole or not at all, with the same rules
 * on the API, the panel and the command line. Found by a review helper.
 */
describe('administrative changes, whole and alike everywhere', () => {
  let app: TestApp;
  let admin: SignedIn;
  beforeAll(async () => {
    app = await startTestApp();
    admin = await signedIn(app, 'admin');
  });
  afterAll(() => app?.close());

  it('PATCH /api/admin/users/:id with a refused password leaves the profile fields of the same request unchanged', async () => {
    const user = await makeUser(app);
    const res = await app.http.patch(`/api/admin/users/${user.id}`, { role: 'admin', email: 'taken-over@example.com', password: 'password' }, admin.as);
    expect([res.status, res.body.error]).toStrictEqual([400, 'invalid_password']);
    const row = (await app.db.query<{ role: string; email: string }>('SELECT role, email FROM users WHERE id = $1', [user.id])).rows[0];
    expect(row, 'the request was answered 400: nothing of it was applied').toStrictEqual({ role: 'user', email: user.email });
    expect((await auditOf(app, 'user.update')).filter((r) => r.user_id === user.id), 'nor audited as done').toStrictEqual([]);
  });

  it('PATCH with profile fields and a password applies both, each audited, and checks the password against the new address', async () => {
    const user = await makeUser(app);
    const email = `renamed-${user.id}@example.com`;
    const refused = await app.http.patch(`/api/admin/users/${user.id}`, { email, password: email }, admin.as);
    expect([refused.status, refused.body.error]).toStrictEqual([400, 'invalid_password']);
    const res = await app.http.patch(`/api/admin/users/${user.id}`, { email, full_name: 'Ada L.', password: 'a brand new passphrase' }, admin.as);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ email, full_name: 'Ada L.' });
    expect((await signIn(app, user.username, 'a brand new passphrase')).res.status).toBe(200);
    expect((await auditOf(app, 'user.update')).filter((r) => r.user_id === user.id)).toHaveLength(1);
    expect((await auditOf(app, 'user.password_set')).filter((r) => r.user_id === user.id)).toHaveLength(1);
  });

  it('the API, like the panel, refuses an administrator marking their own password must-change', async () => {
    const me = await signedIn(app, 'admin');
    const res = await app.http.patch(`/api/admin/users/${me.user.id}`, { must_change_password: true }, me.as);
    expect([res.status, res.body.error]).toStrictEqual([409, 'cannot_require_own_change']);
    expect((await signIn(app, me.user.username, me.user.password)).res.status, 'nothing changed').toBe(200);
  });
});

describe('the command line', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());

  it('like the API and the panel, never leaves no active administrator, and audits only what changed', async () => {
    // a fresh installation: one administrator (the test database's others are set aside)
    await app.db.query("UPDATE users SET active = false WHERE role = 'admin'");
    const only = await makeUser(app, { role: 'admin' });
    const res = await cli(app, ['user', 'set-active', only.username, 'false', '--json']);
    expect(res.code, res.stdout + res.stderr).not.toBe(0);
    expect(res.stdout + res.stderr).toMatch(/last active administrator/);
    const left = (await app.db.query<{ n: number }>("SELECT count(*)::int AS n FROM users WHERE role = 'admin' AND active")).rows[0].n;
    expect(left).toBe(1);

    const user = await makeUser(app);
    expect((await cli(app, ['user', 'set-active', user.username, 'true', '--json'])).code, 'already active').toBe(0);
    expect((await cli(app, ['user', 'set-active', user.username, 'false', '--json'])).code).toBe(0);
    const audited = (await app.db.query<{ action: string }>(
      "SELECT action FROM audit_log WHERE user_id = $1 AND action IN ('user.activate', 'user.deactivate') ORDER BY id", [user.id])).rows.map((r) => r.action);
    expect(audited, 'the no-op activation is not audited').toStrictEqual(['user.deactivate']);
  });
});
