import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signBody, signStandard, verifyWebhook } from '../../src/webhooks/verify.ts';
import { auditOf } from '../admin/support.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';
import { adminHeaders, eventually, type Received, registerWebhook, startReceiver } from './receiver.ts';

const OLD_SECRET = 'the-old-webhook-secret-0123456789';
const NEW_SECRET = 'the-new-webhook-secret-9876543210';

/** Whether a received request carries valid signatures (both header styles) under `secret`. */
function signedWith(r: Received, secret: string): boolean {
  const id = String(r.headers['webhook-id']);
  const ts = Number(r.headers['webhook-timestamp']);
  return r.headers['x-auth-signature'] === signBody(r.raw, secret) && r.headers['webhook-signature'] === signStandard(id, ts, r.raw, secret);
}

/** PATCH /api/webhooks/:id: url, events, active and secret change; the history stays. */
describe('changing a webhook', () => {
  let app: TestApp;
  let headers: Record<string, string>;
  let client: Awaited<ReturnType<typeof makeClient>>;
  let user: Awaited<ReturnType<typeof makeUser>>;
  beforeAll(async () => {
    // retries wait an hour unless a test makes them due: no attempt happens by surprise
    app = await startTestApp({ WEBHOOK_BACKOFF_MS: '3600000' });
    headers = await adminHeaders(app);
    client = await makeClient(app);
    user = await makeUser(app);
  });
  afterAll(() => app?.close());

  /** One user.login event. */
  const login = async () => {
    const r = await app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username: user.username });
    expect(r.status, r.text).toBe(200);
  };
  const patch = (id: number | string, body: unknown, h = headers) => app.http.patch(`/api/webhooks/${id}`, body, { headers: h });
  const deliveryCount = async (id: number) =>
    (await app.db.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1', [id])).rows[0].n;

  it('changes secret, URL, events and active flag without losing its history', async () => {
    const first = await startReceiver();
    const second = await startReceiver();
    try {
      const id = await registerWebhook(app, headers, { url: first.url, events: ['user.login'], secret: OLD_SECRET });
      await login();
      await first.waitFor(() => first.received.length === 1);
      expect(signedWith(first.received[0], OLD_SECRET)).toBe(true);

      const secret = await patch(id, { secret: NEW_SECRET });
      expect(secret.status, secret.text).toBe(200);
      expect(secret.body).toMatchObject({ id, url: first.url, events: ['user.login'], active: true });
      expect(JSON.stringify(secret.body)).not.toContain(NEW_SECRET);
      await login();
      await first.waitFor(() => first.received.length === 2);
      expect(signedWith(first.received[1], NEW_SECRET), 'signed with the new secret').toBe(true);
      expect(signedWith(first.received[1], OLD_SECRET)).toBe(false);

      const moved = await patch(id, { url: second.url });
      expect(moved.status, moved.text).toBe(200);
      expect(moved.body.url).toBe(second.url);
      await login();
      await second.waitFor(() => second.received.length === 1);
      expect(signedWith(second.received[0], NEW_SECRET)).toBe(true);
      expect(first.received.length, 'nothing more to the old URL').toBe(2);

      const events = await patch(id, { events: ['user.logout', 'user.logout', 'client.registered'] });
      expect(events.body.events).toStrictEqual(['user.logout', 'client.registered']);
      const before = await deliveryCount(id);
      await login();
      expect(await deliveryCount(id), 'no longer subscribed to user.login').toBe(before);
      await makeClient(app); // client.registered
      await second.waitFor(() => second.of('client.registered').length === 1);

      const off = await patch(id, { active: false });
      expect(off.body).toMatchObject({ active: false });
      expect(off.body.disabled_reason).toMatch(/disabled by/);
      await makeClient(app);
      expect(await deliveryCount(id), 'an inactive webhook gets no deliveries').toBe(before + 1);
      const on = await patch(id, { active: true });
      expect(on.body).toMatchObject({ active: true, disabled_reason: null });

      // the attempt is recorded just after the receiver answered: wait for the record, bounded
      let history = await app.http.get(`/api/webhooks/${id}/deliveries`, { headers });
      for (let i = 0; i < 100 && history.body.some((d: { status: string }) => d.status !== 'succeeded'); i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        history = await app.http.get(`/api/webhooks/${id}/deliveries`, { headers });
      }
      expect(history.status).toBe(200);
      expect(history.body.length, 'every earlier delivery is still there').toBe(4);
      expect(history.body.every((d: { status: string; attempt_log: unknown[] }) => d.status === 'succeeded' && d.attempt_log.length === 1)).toBe(true);

      const audits = (await auditOf(app, 'webhook.update')).filter((a) => a.details.webhook_id === id);
      expect(audits.map((a) => a.details.changed).reverse()).toStrictEqual([['secret'], ['url'], ['events'], ['active'], ['active']]);
      expect(audits.find((a) => a.details.changed[0] === 'url')!.details.previous_url).toBe(first.url);
      expect(JSON.stringify(audits)).not.toContain(NEW_SECRET);
    } finally {
      await first.close();
      await second.close();
    }
  });

  it('signs every later attempt with the new secret, retries of earlier events included, and sends them to the new URL', async () => {
    let failing = true;
    const old = await startReceiver(() => (failing ? 500 : 200));
    const next = await startReceiver();
    try {
      const id = await registerWebhook(app, headers, { url: old.url, events: ['user.login'], secret: OLD_SECRET });
      await login();
      await old.waitFor(() => old.received.length === 1);
      expect(signedWith(old.received[0], OLD_SECRET)).toBe(true);
      const deliveryId = String(old.received[0].headers['x-auth-delivery']);
      await eventually(async () => (await app.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM webhook_attempts WHERE delivery_id = $1", [deliveryId])).rows[0].n === 1, 10_000, 'the failed attempt to be recorded');

      expect((await patch(id, { secret: NEW_SECRET })).status).toBe(200);
      failing = false;
      // the retry is due in an hour: make it due now, as if the hour had passed
      await app.db.query('UPDATE webhook_deliveries SET next_attempt_at = now() WHERE id = $1', [deliveryId]);
      await old.waitFor(() => old.received.length === 2);
      const retry = old.received[1];
      expect(retry.headers['x-auth-delivery'], 'the same delivery, retried').toBe(deliveryId);
      expect(signedWith(retry, NEW_SECRET), 'the retry is signed with the new secret').toBe(true);
      expect(signedWith(retry, OLD_SECRET)).toBe(false);
      // a receiver that accepts both secrets while they change takes every attempt
      for (const r of [old.received[0], retry]) expect(verifyWebhook(r.raw, r.headers, [OLD_SECRET, NEW_SECRET]).event).toBe('user.login');
      expect(() => verifyWebhook(retry.raw, retry.headers, [OLD_SECRET])).toThrow(/signature does not match/);

      // an earlier event's retry also follows a URL change
      failing = true;
      await login();
      await old.waitFor(() => old.received.length === 3);
      const second = String(old.received[2].headers['x-auth-delivery']);
      await eventually(async () => (await app.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM webhook_attempts WHERE delivery_id = $1", [second])).rows[0].n === 1, 10_000, 'the failed attempt to be recorded');
      expect((await patch(id, { url: next.url, secret: OLD_SECRET })).status).toBe(200);
      await app.db.query('UPDATE webhook_deliveries SET next_attempt_at = now() WHERE id = $1', [second]);
      await next.waitFor(() => next.received.length === 1);
      expect(next.received[0].headers['x-auth-delivery']).toBe(second);
      expect(signedWith(next.received[0], OLD_SECRET)).toBe(true);
      expect(old.received.length).toBe(3);
    } finally {
      await old.close();
      await next.close();
    }
  });

  it('documents the empty body it refuses: the PATCH body needs at least one property', async () => {
    const doc = (await app.http.get('/api/openapi.json')).body as {
      paths: Record<string, Record<string, { requestBody: { content: Record<string, { schema: { minProperties?: number } }> } }>>;
    };
    expect(doc.paths['/api/webhooks/{id}'].patch.requestBody.content['application/json'].schema.minProperties).toBe(1);
    const id = await registerWebhook(app, headers, { url: 'http://127.0.0.1:9/hook', events: ['user.login'], secret: OLD_SECRET });
    const r = await patch(id, {});
    expect(r.status).toBe(400);
    expect(r.body.details).toStrictEqual([expect.objectContaining({ message: 'name at least one of url, events, active, secret' })]);
  });

  it('validates like registration and answers 404 for an unknown webhook', async () => {
    const id = await registerWebhook(app, headers, { url: 'http://127.0.0.1:9/hook', events: ['user.login'], secret: OLD_SECRET });
    for (const body of [{}, { url: 'ftp://example.com/x' }, { url: 'not a url' }, { events: [] }, { events: ['user.nope'] },
      { secret: 'short' }, { active: 'yes' }, { name: 'x' }, { url: 'http://127.0.0.1:9/hook', id: 5 }]) {
      const r = await patch(id, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error).toBe('validation_error');
    }
    const unknown = await patch(999999, { active: false });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toBe('webhook_not_found');
    const member = await makeUser(app);
    const login = await app.http.post('/api/login', { username: member.username, password: member.password });
    expect((await patch(id, { active: false }, { authorization: `Bearer ${login.body.token}` })).status).toBe(403);
    expect((await app.http.patch(`/api/webhooks/${id}`, { active: false })).status).toBe(401);
    const [row] = (await app.db.query<{ url: string; secret: string; active: boolean }>('SELECT url, secret, active FROM webhooks WHERE id = $1', [id])).rows;
    expect(row).toStrictEqual({ url: 'http://127.0.0.1:9/hook', secret: OLD_SECRET, active: true });
  });

  it('applies the SSRF guard of registration to a new URL in production', async () => {
    const production = await startTestApp({ NODE_ENV: 'production', BCRYPT_COST: '10', WEBHOOK_ALLOW_PRIVATE: 'false' }, { db: app.db });
    try {
      const prodHeaders = await adminHeaders(production);
      const id = await registerWebhook(app, headers, { url: 'http://127.0.0.1:9/hook', events: ['user.login'], secret: OLD_SECRET });
      for (const url of ['http://169.254.169.254/', 'http://10.0.0.8/hook', 'http://[::1]/', 'http://localhost:9999/hook']) {
        const r = await production.http.patch(`/api/webhooks/${id}`, { url }, { headers: prodHeaders });
        expect(r.status, url).toBe(400);
        expect(r.body.error, url).toBe('url_not_allowed');
      }
      const [row] = (await app.db.query<{ url: string }>('SELECT url FROM webhooks WHERE id = $1', [id])).rows;
      expect(row.url).toBe('http://127.0.0.1:9/hook');
    } finally {
      await production.close();
    }
  });

  it('answers 400 invalid_id for a malformed id on every webhook route', async () => {
    const routes = (id: string) => [
      { method: 'PATCH', path: `/api/webhooks/${id}`, body: { active: false } },
      { method: 'PATCH', path: `/api/webhooks/${id}`, body: { nonsense: true } },
      { method: 'DELETE', path: `/api/webhooks/${id}` },
      { method: 'GET', path: `/api/webhooks/${id}/deliveries` },
      { method: 'POST', path: `/api/webhooks/${id}/deliveries/00000000-0000-4000-8000-000000000000/redeliver`, body: {} },
    ];
    for (const id of ['abc', '-1', '1.5', '12345678901', '0x10', '0', '007']) {
      for (const route of routes(id)) {
        const r = await app.http.send(route.path, { method: route.method, body: route.body, headers: { ...headers, 'content-type': 'application/json' } });
        expect(r.status, `${route.method} ${route.path}`).toBe(400);
        expect(r.body.error, `${route.method} ${route.path}`).toBe('invalid_id');
      }
    }
  });

  it('edits URL, events and secret in the panel, an empty secret keeping the current one', async () => {
    const admin = await makeUser(app, { role: 'admin' });
    const id = await registerWebhook(app, headers, { url: 'http://127.0.0.1:9/hook', events: ['user.login'], secret: OLD_SECRET });
    const s = formSession(await app.listen());
    const loginPage = await s.get('/login');
    expect((await s.post('/login', { _csrf: hiddenField(loginPage.text, '_csrf'), step: 'password', login: admin.username, password: admin.password })).status).toBe(303);
    const page = await s.get(`/admin/webhooks/${id}`);
    expect(page.status).toBe(200);
    expect(page.text).toMatch(/id="edit-event-user.login" name="events" type="checkbox" value="user.login" checked/);
    const csrf = hiddenField(page.text, '_csrf');
    const row = async () => (await app.db.query<{ url: string; events: string[]; secret: string }>('SELECT url, events, secret FROM webhooks WHERE id = $1', [id])).rows[0];

    const body = new URLSearchParams({ _csrf: csrf, url: 'http://127.0.0.1:10/hook', secret: '' });
    body.append('events', 'user.logout');
    body.append('events', 'user.locked');
    const res = await fetchForm(s, `/admin/webhooks/${id}`, body);
    expect(res.status).toBe(303);
    expect(await row()).toStrictEqual({ url: 'http://127.0.0.1:10/hook', events: ['user.logout', 'user.locked'], secret: OLD_SECRET });

    const withSecret = new URLSearchParams({ _csrf: csrf, url: 'http://127.0.0.1:10/hook', secret: NEW_SECRET, events: 'user.logout' });
    expect((await fetchForm(s, `/admin/webhooks/${id}`, withSecret)).status).toBe(303);
    expect((await row()).secret).toBe(NEW_SECRET);
    expect((await s.get(`/admin/webhooks/${id}`)).text).toContain('signed with the new secret');

    const noEvents = new URLSearchParams({ _csrf: csrf, url: 'http://127.0.0.1:11/hook', secret: '' });
    expect((await fetchForm(s, `/admin/webhooks/${id}`, noEvents)).status).toBe(303);
    expect((await s.get(`/admin/webhooks/${id}`)).text).toContain('Tick at least one event.');
    const shortSecret = new URLSearchParams({ _csrf: csrf, url: 'http://127.0.0.1:11/hook', secret: 'short', events: 'user.login' });
    expect((await fetchForm(s, `/admin/webhooks/${id}`, shortSecret)).status).toBe(303);
    expect((await s.get(`/admin/webhooks/${id}`)).text).toContain('secret: must be at least 16 characters');
    expect(await row(), 'a refused form changes nothing').toStrictEqual({ url: 'http://127.0.0.1:10/hook', events: ['user.logout'], secret: NEW_SECRET });

    // a signed-in non-administrator gets 403 and changes nothing
    const member = await makeUser(app);
    const m = formSession(await app.listen());
    const memberLogin = await m.get('/login');
    expect((await m.post('/login', { _csrf: hiddenField(memberLogin.text, '_csrf'), step: 'password', login: member.username, password: member.password })).status).toBe(303);
    const memberCsrf = hiddenField((await m.get('/dashboard')).text, '_csrf');
    const forbidden = await fetchForm(m, `/admin/webhooks/${id}`, new URLSearchParams({ _csrf: memberCsrf, url: 'http://127.0.0.1:12/hook', secret: '', events: 'user.login' }));
    expect(forbidden.status).toBe(403);
    expect((await row()).url).toBe('http://127.0.0.1:10/hook');
  });
});

/** Posts a urlencoded body with repeated fields (one per ticked checkbox) through a form session, with its cookies. */
function fetchForm(s: ReturnType<typeof formSession>, path: string, body: URLSearchParams) {
  return s.post(path, body);
}
