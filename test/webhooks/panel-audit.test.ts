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

/** A form saved from a page shown before another administrator's change (as the user and client forms: test/admin/stale-forms.test.ts). */
describe('the panel\'s webhook edit form, saved from an older page', () => {
  let app: TestApp;
  let adminA: Awaited<ReturnType<typeof makeUser>>;
  let adminB: Awaited<ReturnType<typeof makeUser>>;
  beforeAll(async () => {
    app = await startTestApp();
    adminA = await makeUser(app, { role: 'admin' });
    adminB = await makeUser(app, { role: 'admin' });
  });
  afterAll(() => app?.close());

  const byB = () => ({ via: 'admin_api' as const, userId: adminB.id, username: adminB.username });
  const rowOf = async (id: number) => (await app.db.query<{ url: string; events: string[] }>('SELECT url, events FROM webhooks WHERE id = $1', [id])).rows[0];
  async function pageOf(id: number) {
    const s = await panelSession(app, adminA);
    return { s, page: (await s.get(`/admin/webhooks/${id}`)).text };
  }
  /** The edit form as the browser sends it: its hidden fields, the URL and the ticked events, with `changes`. */
  function formOf(page: string, id: number, changes: Record<string, string | string[]>) {
    const form = page.slice(page.indexOf(`class="form" method="post" action="/admin/webhooks/${id}"`));
    const body = form.slice(0, form.indexOf('</form>'));
    const fields: Record<string, string | string[]> = {};
    for (const m of body.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"/g)) fields[m[1]] = m[2];
    fields.url = /name="url"[^>]*value="([^"]*)"/.exec(body)![1];
    fields.events = [...body.matchAll(/name="events" type="checkbox" value="([^"]+)" checked/g)].map((m) => m[1]);
    fields.secret = '';
    return { ...fields, ...changes };
  }

  it('saves only what was changed: events another administrator changed meanwhile stay theirs', async () => {
    const hook = await app.services.webhooks.register({ url: 'http://127.0.0.1:9/a', events: ['user.login', 'user.locked'], secret: 'the-old-signing-secret' }, { via: 'cli' });
    const { s, page } = await pageOf(hook.id);
    await app.services.webhooks.update(hook.id, { events: ['user.login'] }, byB());
    expect((await s.post(`/admin/webhooks/${hook.id}`, formOf(page, hook.id, { url: 'http://127.0.0.1:9/a2' }))).status).toBe(303);
    expect(await rowOf(hook.id)).toStrictEqual({ url: 'http://127.0.0.1:9/a2', events: ['user.login'] });
  });

  it('refuses a field both changed (edit_conflict), keeping what was typed; saving again then replaces it', async () => {
    const hook = await app.services.webhooks.register({ url: 'http://127.0.0.1:9/b', events: ['user.login'], secret: 'the-old-signing-secret' }, { via: 'cli' });
    const { s, page } = await pageOf(hook.id);
    await app.services.webhooks.update(hook.id, { url: 'http://127.0.0.1:9/b-by-b' }, byB());
    const refused = await s.post(`/admin/webhooks/${hook.id}`, formOf(page, hook.id, { url: 'http://127.0.0.1:9/b-by-a' }));
    expect(refused.status).toBe(400);
    expect(refused.text).toContain('The receiver URL was changed by someone else since this page was opened.');
    expect((await rowOf(hook.id)).url, 'nothing saved').toBe('http://127.0.0.1:9/b-by-b');
    expect(hiddenField(refused.text, 'was_url'), 'the page judges the next save against what is saved now').toBe('http://127.0.0.1:9/b-by-b');
    expect((await s.post(`/admin/webhooks/${hook.id}`, formOf(refused.text, hook.id, {}))).status).toBe(303);
    expect((await rowOf(hook.id)).url, 'the form kept what was typed: saved now').toBe('http://127.0.0.1:9/b-by-a');
  });

  it('the events too: ticking one more on an older page is refused when someone else changed them, and nothing is audited', async () => {
    const hook = await app.services.webhooks.register({ url: 'http://127.0.0.1:9/c', events: ['user.login', 'user.locked'], secret: 'the-old-signing-secret' }, { via: 'cli' });
    const { s, page } = await pageOf(hook.id);
    await app.services.webhooks.update(hook.id, { events: ['user.login'] }, byB());
    const refused = await s.post(`/admin/webhooks/${hook.id}`, formOf(page, hook.id, { events: ['user.login', 'user.locked', 'user.logout'] }));
    expect(refused.status).toBe(400);
    expect(refused.text).toContain('The events were changed by someone else since this page was opened.');
    expect((await rowOf(hook.id)).events).toStrictEqual(['user.login']);
    const mine = (await auditOf(app, 'webhook.update')).filter((a) => a.details.webhook_id === hook.id && a.username === adminA.username);
    expect(mine).toStrictEqual([]);
  });

  it('two saves of the URL from pages shown alike, sent at once: one saved, the other edit_conflict', async () => {
    const hook = await app.services.webhooks.register({ url: 'http://127.0.0.1:9/d', events: ['user.login'], secret: 'the-old-signing-secret' }, { via: 'cli' });
    const [a, b] = [await pageOf(hook.id), await pageOf(hook.id)];
    const [ra, rb] = await Promise.all([
      a.s.post(`/admin/webhooks/${hook.id}`, formOf(a.page, hook.id, { url: 'http://127.0.0.1:9/d-a' })),
      b.s.post(`/admin/webhooks/${hook.id}`, formOf(b.page, hook.id, { url: 'http://127.0.0.1:9/d-b' })),
    ]);
    expect([ra.status, rb.status].sort()).toStrictEqual([303, 400]);
  });
});
