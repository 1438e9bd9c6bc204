import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { hiddenField } from '../pages/form-session.ts';
import { auditOf, panelSession } from '../admin/support.ts';

/** The panel's edit form sends every field; the audit names what changed (found by a review helper). */
describe('the panel\'s webhook edit form', () => {
  let app: TestApp;
  let adminUser: Awaited<ReturnType<typeof makeUser>>;
  beforeAll(async () => {
    app = await startTestApp();
    adminUser = await makeUser(app, { role: 'admin' });
  });
  afterAll(() => app?.close());

  it('audits a new secret as a change of the secret only (as PATCH /api/webhooks/:id does), not of the URL and events it left alone', async () => {
    const hook = await app.services.webhooks.register({ url: 'http://127.0.0.1:9/hook', events: ['user.login'], secret: 'the-old-signing-secret' }, { via: 'cli' });
    const s = await panelSession(app, adminUser);
    const page = await s.get(`/admin/webhooks/${hook.id}`);
    // the form as rendered (URL and the ticked event unchanged), with a new secret typed in
    const saved = await s.post(`/admin/webhooks/${hook.id}`, {
      _csrf: hiddenField(page.text, '_csrf'), url: 'http://127.0.0.1:9/hook', secret: 'the-new-signing-secret', events: 'user.login',
    });
    expect(saved.status).toBe(303);
    const [entry] = (await auditOf(app, 'webhook.update')).filter((a) => a.details.webhook_id === hook.id);
    expect(entry.details.changed).toStrictEqual(['secret']);
  });

  it('writes no "changed" entry for a save that changes nothing', async () => {
    const hook = await app.services.webhooks.register({ url: 'http://127.0.0.1:9/other', events: ['user.logout'], secret: 'the-old-signing-secret' }, { via: 'cli' });
    const s = await panelSession(app, adminUser);
    const page = await s.get(`/admin/webhooks/${hook.id}`);
    const saved = await s.post(`/admin/webhooks/${hook.id}`, { _csrf: hiddenField(page.text, '_csrf'), url: 'http://127.0.0.1:9/other', secret: '', events: 'user.logout' });
    expect(saved.status).toBe(303);
    const entries = (await auditOf(app, 'webhook.update')).filter((a) => a.details.webhook_id === hook.id);
    expect(entries.map((e) => e.details.changed)).toStrictEqual([]);
  });
});
