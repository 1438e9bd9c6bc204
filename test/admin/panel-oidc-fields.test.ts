import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { hiddenField } from '../pages/form-session.ts';
import { auditOf, panelSession } from './support.ts';

/** The values the edit page shows (its inputs and textareas), as a browser would send them back. */
function formValues(body: string): Record<string, string> {
  const unescape = (v: string) => v.replace(/&#34;|&quot;/g, '"').replace(/&#39;/g, '\'').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
  const fields: Record<string, string> = {};
  const form = /<form class="form" method="post" action="\/admin\/clients\/[^"]+">([\s\S]*?)<\/form>/.exec(body)![1];
  for (const m of form.matchAll(/<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"/g)) fields[m[1]] = unescape(m[2]);
  for (const m of form.matchAll(/<textarea[^>]*name="([^"]+)"[^>]*>([\s\S]*?)<\/textarea>/g)) fields[m[1]] = unescape(m[2]);
  return fields;
}

describe('admin panel: the OpenID Connect fields of a client system', () => {
  let app: TestApp;
  let admin: Awaited<ReturnType<typeof makeUser>>;
  beforeAll(async () => {
    app = await startTestApp();
    admin = await makeUser(app, { role: 'admin' });
  });
  afterAll(() => app?.close());

  it('registers redirect URIs, edits them, sets and clears the back-channel URL, audited naming the fields', async () => {
    const s = await panelSession(app, admin);
    const list = await s.get('/admin/clients');
    expect(list.text).toMatch(/name="redirect_uris"/);
    expect(list.text).toMatch(/name="public"/);
    const made = await s.post('/admin/clients', {
      _csrf: hiddenField(list.text, '_csrf'), submission: hiddenField(list.text, 'submission'), client_name: 'Oidc Panel', client_id: 'oidc-panel',
      callback_url: 'https://rp.example/cb', allowed_ips: '127.0.0.1',
      redirect_uris: 'https://rp.example/oidc\r\nhttps://rp.example/oidc2', post_logout_redirect_uris: 'https://rp.example/bye',
    });
    expect(made.status).toBe(200);
    expect(made.text).toMatch(/data-secret/);
    let c = (await app.services.clients.findClient('oidc-panel'))!;
    expect(c.redirect_uris).toStrictEqual(['https://rp.example/oidc', 'https://rp.example/oidc2']);
    expect(c.post_logout_redirect_uris).toStrictEqual(['https://rp.example/bye']);
    expect(c.backchannel_logout_uri).toBeNull();

    const page = await s.get('/admin/clients/oidc-panel');
    expect(page.text).toContain('https://rp.example/oidc\nhttps://rp.example/oidc2</textarea>');
    const values = formValues(page.text);
    expect(values.was_redirect_uris).toBe('https://rp.example/oidc\nhttps://rp.example/oidc2');
    const saved = await s.post('/admin/clients/oidc-panel', { ...values, redirect_uris: 'https://rp.example/only', backchannel_logout_uri: 'https://rp.example/bc' });
    expect(saved.status).toBe(303);
    c = (await app.services.clients.findClient('oidc-panel'))!;
    expect(c.redirect_uris).toStrictEqual(['https://rp.example/only']);
    expect(c.post_logout_redirect_uris).toStrictEqual(['https://rp.example/bye']);
    expect(c.backchannel_logout_uri).toBe('https://rp.example/bc');
    const [row] = (await auditOf(app, 'client.update')).filter((r) => r.client_id === 'oidc-panel');
    expect(Object.keys(row.details.changed).sort()).toStrictEqual(['backchannel_logout_uri', 'redirect_uris']);

    const again = formValues((await s.get('/admin/clients/oidc-panel')).text);
    expect(again.backchannel_logout_uri).toBe('https://rp.example/bc');
    expect((await s.post('/admin/clients/oidc-panel', { ...again, backchannel_logout_uri: '' })).status).toBe(303);
    expect((await app.services.clients.findClient('oidc-panel'))!.backchannel_logout_uri).toBeNull();
    const [cleared] = (await auditOf(app, 'client.update')).filter((r) => r.client_id === 'oidc-panel');
    expect(Object.keys(cleared.details.changed)).toStrictEqual(['backchannel_logout_uri']);

    // a bad URL: the same form, 400, naming the problem on its field, what was typed kept, nothing saved
    const bad = formValues((await s.get('/admin/clients/oidc-panel')).text);
    const refused = await s.post('/admin/clients/oidc-panel', { ...bad, redirect_uris: 'https://rp.example/only\nnot a url' });
    expect(refused.status).toBe(400);
    expect(refused.text).toMatch(/redirect_uris/);
    expect(refused.text).toMatch(/name="redirect_uris"[^>]*aria-invalid="true"/);
    expect(refused.text).toContain('not a url</textarea>');
    expect((await app.services.clients.findClient('oidc-panel'))!.redirect_uris).toStrictEqual(['https://rp.example/only']);
    const badBc = await s.post('/admin/clients/oidc-panel', { ...bad, backchannel_logout_uri: 'https://rp.example/bc#frag' });
    expect(badBc.status).toBe(400);
    expect(badBc.text).toMatch(/name="backchannel_logout_uri"[^>]*aria-invalid="true"/);
  });

  it('refuses a bad redirect URI at registration with a 400 page, and registers a public client showing no secret', async () => {
    const s = await panelSession(app, admin);
    let list = await s.get('/admin/clients');
    const refused = await s.post('/admin/clients', {
      _csrf: hiddenField(list.text, '_csrf'), submission: hiddenField(list.text, 'submission'), client_name: 'Bad Oidc', client_id: 'bad-oidc',
      callback_url: 'https://rp.example/cb', allowed_ips: '127.0.0.1', redirect_uris: 'ftp://rp.example/x',
    });
    expect(refused.status).toBe(400);
    expect(refused.text).toMatch(/name="redirect_uris"[^>]*aria-invalid="true"/);
    expect(refused.text).toContain('ftp://rp.example/x</textarea>');
    expect(await app.services.clients.findClient('bad-oidc')).toBeNull();

    list = await s.get('/admin/clients');
    const made = await s.post('/admin/clients', {
      _csrf: hiddenField(list.text, '_csrf'), submission: hiddenField(list.text, 'submission'), client_name: 'Spa Panel', client_id: 'spa-panel',
      callback_url: 'https://spa.example/cb', allowed_ips: '', redirect_uris: 'https://spa.example/cb', public: 'on',
    });
    expect(made.status, made.text.slice(0, 2000)).toBeLessThan(400);
    const shown = made.status === 303 ? await s.get(String(made.headers.location)) : made;
    expect(shown.text).not.toMatch(/data-secret|id="client-secret"/);
    expect(shown.text).toMatch(/public client/);
    const c = (await app.services.clients.findClient('spa-panel'))!;
    expect(c.public).toBe(true);
    expect(c.redirect_uris).toStrictEqual(['https://spa.example/cb']);
  });
});
