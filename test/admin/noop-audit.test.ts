import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { auditOf, type SignedIn, signedIn } from './support.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';
import { admin as runAdmin } from '../helpers/cli.ts';

describe('admin API: a PATCH that changes nothing writes no audit entry', () => {
  let app: TestApp;
  let admin: SignedIn;
  beforeAll(async () => {
    app = await startTestApp();
    admin = await signedIn(app, 'admin');
  });
  afterAll(() => app?.close());

  it('PATCH {must_change_password: false} on a user without the flag audits nothing', async () => {
    const user = await makeUser(app);
    const before = (await auditOf(app, 'user.password_set')).filter((r) => r.user_id === user.id).length;
    const res = await app.http.patch(`/api/admin/users/${user.id}`, { must_change_password: false }, admin.as);
    expect(res.status).toBe(200);
    expect(res.body.must_change_password).toBe(false);
    const after = (await auditOf(app, 'user.password_set')).filter((r) => r.user_id === user.id);
    expect(after.length - before, `no-op audited as: ${JSON.stringify(after[0]?.details)}`).toBe(0);
    // a flag that changes is still written and audited, once
    for (const flag of [true, true, false]) expect((await app.http.patch(`/api/admin/users/${user.id}`, { must_change_password: flag }, admin.as)).status).toBe(200);
    const changes = (await auditOf(app, 'user.password_set')).filter((r) => r.user_id === user.id).map((r) => r.details.must_change);
    expect(changes.reverse(), 'set, then cleared: the second "set" changed nothing').toStrictEqual([true, false]);
  });

  it('an unlock of a user with no lock and no failed sign-ins audits nothing (API and command line); one with them is audited once', async () => {
    const user = await makeUser(app);
    const res = await app.http.post(`/api/admin/users/${user.id}/unlock`, {}, admin.as);
    expect(res.status).toBe(200);
    expect(res.body.locked_until).toBeNull();
    expect((await runAdmin(app, ['user', 'unlock', user.username])).code).toBe(0);
    const unlocks = async () => (await auditOf(app, 'user.unlock')).filter((r) => r.user_id === user.id);
    expect(await unlocks(), 'nothing was unlocked').toStrictEqual([]);
    expect((await app.http.post('/api/auth/login', { login: user.username, password: 'wrong' })).status).toBe(401);
    expect((await app.http.post(`/api/admin/users/${user.id}/unlock`, {}, admin.as)).status).toBe(200);
    expect((await app.http.post(`/api/admin/users/${user.id}/unlock`, {}, admin.as)).status).toBe(200);
    expect(await unlocks(), 'the failed sign-in cleared, once').toHaveLength(1);
  });

  it('the panel\'s Disable on a webhook that is already disabled (a page open in two tabs) audits nothing, as PATCH does', async () => {
    const webhook = await app.services.webhooks.register({ url: 'http://127.0.0.1:9/hook', events: ['user.login'], secret: 'sixteen-chars-secret' }, { via: 'cli' });
    const s = formSession(app.app);
    const login = await s.get('/login');
    expect((await s.post('/login', { _csrf: hiddenField(login.text, '_csrf'), step: 'password', login: admin.user.username, password: admin.user.password })).status).toBe(303);
    const page = (await s.get(`/admin/webhooks/${webhook.id}`)).text;
    const csrf = hiddenField(page, '_csrf');
    expect((await s.post(`/admin/webhooks/${webhook.id}/active`, { _csrf: csrf, active: 'false' })).status).toBe(303);
    // the API: a PATCH that changes nothing is not audited
    expect((await app.http.patch(`/api/webhooks/${webhook.id}`, { active: false }, admin.as)).status).toBe(200);
    const afterFirst = (await auditOf(app, 'webhook.disable')).length + (await auditOf(app, 'webhook.update')).length;
    // as a receiver's 410 leaves it: the reason must outlive a repeated Disable
    await app.db.query("UPDATE webhooks SET disabled_reason = 'receiver answered 410 Gone' WHERE id = $1", [webhook.id]);
    // the same Disable form sent again from a page rendered before
    expect((await s.post(`/admin/webhooks/${webhook.id}/active`, { _csrf: csrf, active: 'false' })).status).toBe(303);
    const afterSecond = (await auditOf(app, 'webhook.disable')).length + (await auditOf(app, 'webhook.update')).length;
    expect(afterSecond - afterFirst, 'a disable that changed nothing was audited').toBe(0);
    const reason = (await app.db.query<{ disabled_reason: string | null; active: boolean }>('SELECT active, disabled_reason FROM webhooks WHERE id = $1', [webhook.id])).rows[0];
    expect(reason).toStrictEqual({ active: false, disabled_reason: 'receiver answered 410 Gone' });
  });
});
