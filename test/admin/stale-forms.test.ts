import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { hiddenField } from '../pages/form-session.ts';
import { auditOf, panelSession } from './support.ts';

/** The form of a page as the browser sends it back: every hidden and visible field it carries, with `changes`. */
function formOf(page: string, action: string, changes: Record<string, string>): Record<string, string> {
  const form = page.slice(page.indexOf(`action="${action}"`));
  const body = form.slice(0, form.indexOf('</form>'));
  const fields: Record<string, string> = {};
  const unescape = (v: string) => v.replace(/&#(\d+);/g, (_m, n) => String.fromCharCode(Number(n))).replace(/&amp;/g, '&').replace(/&quot;/g, '"').replace(/&lt;/g, '<').replace(/&gt;/g, '>');
  for (const m of body.matchAll(/<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"/g)) fields[m[1]] = unescape(m[2]);
  for (const m of body.matchAll(/<textarea[^>]*name="([^"]+)"[^>]*>([\s\S]*?)<\/textarea>/g)) fields[m[1]] = unescape(m[2]);
  for (const m of body.matchAll(/<select[^>]*name="([^"]+)"[^>]*>([\s\S]*?)<\/select>/g)) fields[m[1]] = /<option value="([^"]*)" selected/.exec(m[2])?.[1] ?? '';
  delete fields.allow_everything; // an unticked box is not sent
  return { ...fields, ...changes };
}

describe('admin panel: a form saved from a page shown before another administrator\'s change', () => {
  let app: TestApp;
  let adminA: Awaited<ReturnType<typeof makeUser>>;
  let adminB: Awaited<ReturnType<typeof makeUser>>;
  beforeAll(async () => {
    app = await startTestApp();
    adminA = await makeUser(app, { role: 'admin' });
    adminB = await makeUser(app, { role: 'admin' });
  });
  afterAll(() => app?.close());

  const roleOf = async (id: number) => (await app.db.query<{ role: string; email: string }>('SELECT role, email FROM users WHERE id = $1', [id])).rows[0];

  it('saves only the field changed: the admin role another administrator took away meanwhile stays away', async () => {
    const rogue = await makeUser(app, { role: 'admin', fullName: 'Rogue' });
    const a = await panelSession(app, adminA);
    const pageA = (await a.get(`/admin/users/${rogue.id}`)).text;
    const b = await panelSession(app, adminB);
    const pageB = (await b.get(`/admin/users/${rogue.id}`)).text;
    expect((await b.post(`/admin/users/${rogue.id}`, formOf(pageB, `/admin/users/${rogue.id}`, { role: 'user' }))).status).toBe(303);
    const saved = await a.post(`/admin/users/${rogue.id}`, formOf(pageA, `/admin/users/${rogue.id}`, { email: `fixed.${rogue.email}` }));
    expect(saved.status).toBe(303);
    expect(await roleOf(rogue.id)).toStrictEqual({ role: 'user', email: `fixed.${rogue.email}` });
  });

  it('refuses a field both changed (edit_conflict), showing what is saved now; saving again then replaces it', async () => {
    const user = await makeUser(app);
    const a = await panelSession(app, adminA);
    const pageA = (await a.get(`/admin/users/${user.id}`)).text;
    await app.services.users.updateProfile(user.id, { email: `b.${user.email}` }, { via: 'admin_api', userId: adminB.id, username: adminB.username });
    const refused = await a.post(`/admin/users/${user.id}`, formOf(pageA, `/admin/users/${user.id}`, { email: `a.${user.email}` }));
    expect(refused.status).toBe(400);
    expect(refused.text).toContain('The email address was changed by someone else since this page was opened.');
    expect((await roleOf(user.id)).email, 'nothing saved').toBe(`b.${user.email}`);
    expect(hiddenField(refused.text, 'was_email'), 'the page shows what is saved now').toBe(`b.${user.email}`);
    const again = await a.post(`/admin/users/${user.id}`, formOf(refused.text, `/admin/users/${user.id}`, {}));
    expect(again.status).toBe(303);
    expect((await roleOf(user.id)).email, 'the form kept what was typed: saved now').toBe(`a.${user.email}`);
  });

  it('does not re-admit a range another administrator just removed from a client\'s allow list', async () => {
    const client = await makeClient(app, { allowedIps: ['203.0.113.7', '198.51.100.0/24'], callbackUrl: 'https://shop.example/cb' });
    const a = await panelSession(app, adminA);
    const action = `/admin/clients/${client.client_id}`;
    const pageA = (await a.get(action)).text;
    await app.services.clients.updateClient(client.client_id, { allowedIps: ['203.0.113.7'] }, { via: 'admin_panel', userId: adminB.id, username: adminB.username });
    expect((await a.post(action, formOf(pageA, action, { client_name: 'Renamed' }))).status).toBe(303);
    const row = (await app.db.query<{ allowed_ips: string[]; client_name: string }>('SELECT allowed_ips, client_name FROM clients WHERE client_id = $1', [client.client_id])).rows[0];
    expect(row).toStrictEqual({ allowed_ips: ['203.0.113.7'], client_name: 'Renamed' });
    // the allow list edited from the old page: a conflict, not a silent re-admission
    const pageA2 = pageA;
    const conflict = await a.post(action, formOf(pageA2, action, { allowed_ips: '203.0.113.7\n198.51.100.0/24\n192.0.2.1' }));
    expect(conflict.status).toBe(400);
    expect(conflict.text).toContain('The allow list was changed by someone else since this page was opened.');
  });

  it('a save after a refusal still saves only what the administrator changed: after edit_conflict the demotion stays', async () => {
    const rogue = await makeUser(app, { role: 'admin' });
    const a = await panelSession(app, adminA);
    const action = `/admin/users/${rogue.id}`;
    const pageA = (await a.get(action)).text;
    await app.services.users.updateProfile(rogue.id, { email: `b.${rogue.email}`, role: 'user' }, { via: 'admin_api', userId: adminB.id, username: adminB.username });
    const refused = await a.post(action, formOf(pageA, action, { email: `a.${rogue.email}` }));
    expect(refused.text).toContain('The email address was changed by someone else');
    expect(/<option value="user" selected/.test(refused.text), 'the page shows the role as saved now').toBe(true);
    expect((await a.post(action, formOf(refused.text, action, {}))).status).toBe(303);
    expect(await roleOf(rogue.id)).toStrictEqual({ role: 'user', email: `a.${rogue.email}` });
  });

  it('a save after a validation error does not re-admit a range removed meanwhile', async () => {
    const client = await makeClient(app, { allowedIps: ['203.0.113.7', '198.51.100.0/24'], callbackUrl: 'https://shop.example/cb' });
    const a = await panelSession(app, adminA);
    const action = `/admin/clients/${client.client_id}`;
    const pageA = (await a.get(action)).text;
    await app.services.clients.updateClient(client.client_id, { allowedIps: ['203.0.113.7'] }, { via: 'admin_panel', userId: adminB.id, username: adminB.username });
    const refused = await a.post(action, formOf(pageA, action, { callback_url: 'javascript:alert(1)' }));
    expect(refused.status).toBe(400);
    expect((await a.post(action, formOf(refused.text, action, { callback_url: 'https://shop.example/cb2' }))).status).toBe(303);
    const row = (await app.db.query<{ allowed_ips: string[]; callback_url: string }>('SELECT allowed_ips, callback_url FROM clients WHERE client_id = $1', [client.client_id])).rows[0];
    expect(row).toStrictEqual({ allowed_ips: ['203.0.113.7'], callback_url: 'https://shop.example/cb2' });
  });

  it('two saves of one field from pages shown alike, sent at once: one saved, the other edit_conflict (checked under the row\'s lock)', async () => {
    const subject = await makeUser(app);
    const action = `/admin/users/${subject.id}`;
    const a = await panelSession(app, adminA);
    const b = await panelSession(app, adminB);
    const [pageA, pageB] = [(await a.get(action)).text, (await b.get(action)).text];
    const [ra, rb] = await Promise.all([
      a.post(action, formOf(pageA, action, { email: `a.${subject.email}` })), b.post(action, formOf(pageB, action, { email: `b.${subject.email}` }))]);
    expect([ra.status, rb.status].sort(), 'one saved, the other refused').toStrictEqual([303, 400]);
  });

  it('the same for a client system\'s allow list', async () => {
    const client = await makeClient(app, { allowedIps: ['203.0.113.7'] });
    const action = `/admin/clients/${client.client_id}`;
    const a = await panelSession(app, adminA);
    const b = await panelSession(app, adminB);
    const [pageA, pageB] = [(await a.get(action)).text, (await b.get(action)).text];
    const [ra, rb] = await Promise.all([
      a.post(action, formOf(pageA, action, { allowed_ips: '203.0.113.7\n192.0.2.1' })), b.post(action, formOf(pageB, action, { allowed_ips: '198.51.100.9' }))]);
    expect([ra.status, rb.status].sort(), 'one saved, the other refused').toStrictEqual([303, 400]);
  });

  it('a form without the shown values (a script) saves every field, as before', async () => {
    const user = await makeUser(app, { fullName: 'Script' });
    const a = await panelSession(app, adminA);
    const page = (await a.get(`/admin/users/${user.id}`)).text;
    const r = await a.post(`/admin/users/${user.id}`, { _csrf: hiddenField(page, '_csrf'), email: user.email, full_name: 'Script', role: 'admin' });
    expect(r.status).toBe(303);
    expect((await roleOf(user.id)).role).toBe('admin');
  });

  const byB = () => ({ via: 'admin_api' as const, userId: adminB.id, username: adminB.username });
  const rowOf = async (id: number) => (await app.db.query<{ url: string; events: string[] }>('SELECT url, events FROM webhooks WHERE id = $1', [id])).rows[0];
  async function pageOf(id: number) {
    const s = await panelSession(app, adminA);
    return { s, page: (await s.get(`/admin/webhooks/${id}`)).text };
  }
  /** A webhook's edit form as the browser sends it (its ticked checkboxes, which formOf does not read): its hidden fields, the URL and the ticked events, with `changes`. */
  function webhookFormOf(page: string, id: number, changes: Record<string, string | string[]>) {
    const form = page.slice(page.indexOf(`class="form" method="post" action="/admin/webhooks/${id}"`));
    const body = form.slice(0, form.indexOf('</form>'));
    const fields: Record<string, string | string[]> = {};
    for (const m of body.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"/g)) fields[m[1]] = m[2];
    fields.url = /name="url"[^>]*value="([^"]*)"/.exec(body)![1];
    fields.events = [...body.matchAll(/name="events" type="checkbox" value="([^"]+)" checked/g)].map((m) => m[1]);
    fields.secret = '';
    return { ...fields, ...changes };
  }

  it('a webhook\'s form saves only what was changed: events another administrator changed meanwhile stay theirs', async () => {
    const hook = await app.services.webhooks.register({ url: 'http://127.0.0.1:9/a', events: ['user.login', 'user.locked'], secret: 'the-old-signing-secret' }, { via: 'cli' });
    const { s, page } = await pageOf(hook.id);
    await app.services.webhooks.update(hook.id, { events: ['user.login'] }, byB());
    expect((await s.post(`/admin/webhooks/${hook.id}`, webhookFormOf(page, hook.id, { url: 'http://127.0.0.1:9/a2' }))).status).toBe(303);
    expect(await rowOf(hook.id)).toStrictEqual({ url: 'http://127.0.0.1:9/a2', events: ['user.login'] });
  });

  it('a webhook\'s form refuses a field both changed (edit_conflict), keeping what was typed; saving again then replaces it', async () => {
    const hook = await app.services.webhooks.register({ url: 'http://127.0.0.1:9/b', events: ['user.login'], secret: 'the-old-signing-secret' }, { via: 'cli' });
    const { s, page } = await pageOf(hook.id);
    await app.services.webhooks.update(hook.id, { url: 'http://127.0.0.1:9/b-by-b' }, byB());
    const refused = await s.post(`/admin/webhooks/${hook.id}`, webhookFormOf(page, hook.id, { url: 'http://127.0.0.1:9/b-by-a' }));
    expect(refused.status).toBe(400);
    expect(refused.text).toContain('The receiver URL was changed by someone else since this page was opened.');
    expect((await rowOf(hook.id)).url, 'nothing saved').toBe('http://127.0.0.1:9/b-by-b');
    expect(hiddenField(refused.text, 'was_url'), 'the page judges the next save against what is saved now').toBe('http://127.0.0.1:9/b-by-b');
    expect((await s.post(`/admin/webhooks/${hook.id}`, webhookFormOf(refused.text, hook.id, {}))).status).toBe(303);
    expect((await rowOf(hook.id)).url, 'the form kept what was typed: saved now').toBe('http://127.0.0.1:9/b-by-a');
  });

  it('a webhook\'s events too: ticking one more on an older page is refused when someone else changed them, and nothing is audited', async () => {
    const hook = await app.services.webhooks.register({ url: 'http://127.0.0.1:9/c', events: ['user.login', 'user.locked'], secret: 'the-old-signing-secret' }, { via: 'cli' });
    const { s, page } = await pageOf(hook.id);
    await app.services.webhooks.update(hook.id, { events: ['user.login'] }, byB());
    const refused = await s.post(`/admin/webhooks/${hook.id}`, webhookFormOf(page, hook.id, { events: ['user.login', 'user.locked', 'user.logout'] }));
    expect(refused.status).toBe(400);
    expect(refused.text).toContain('The events were changed by someone else since this page was opened.');
    expect((await rowOf(hook.id)).events).toStrictEqual(['user.login']);
    const mine = (await auditOf(app, 'webhook.update')).filter((a) => a.details.webhook_id === hook.id && a.username === adminA.username);
    expect(mine).toStrictEqual([]);
  });

  it('two saves of a webhook\'s URL from pages shown alike, sent at once: one saved, the other edit_conflict', async () => {
    const hook = await app.services.webhooks.register({ url: 'http://127.0.0.1:9/d', events: ['user.login'], secret: 'the-old-signing-secret' }, { via: 'cli' });
    const [a, b] = [await pageOf(hook.id), await pageOf(hook.id)];
    const [ra, rb] = await Promise.all([
      a.s.post(`/admin/webhooks/${hook.id}`, webhookFormOf(a.page, hook.id, { url: 'http://127.0.0.1:9/d-a' })),
      b.s.post(`/admin/webhooks/${hook.id}`, webhookFormOf(b.page, hook.id, { url: 'http://127.0.0.1:9/d-b' })),
    ]);
    expect([ra.status, rb.status].sort()).toStrictEqual([303, 400]);
  });
});
