import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser, TEST_PASSWORD } from '../helpers/factories.ts';
import { adminHeaders, eventually, registerWebhook, startReceiver } from './receiver.ts';

const SECRET = 'registration-secret-0123456789';

describe('webhook registration API', () => {
  let app: TestApp;
  let admin: Record<string, string>;
  beforeAll(async () => {
    app = await startTestApp();
    admin = await adminHeaders(app);
  });
  afterAll(() => app.close());

  it('registers a webhook: 201 with id, url, events, active, created_at and never the secret', async () => {
    const r = await app.http.post('/api/webhooks', { url: 'https://hooks.example.com/in', events: ['user.login', 'user.locked'], secret: SECRET }, { headers: admin });
    expect(r.status, r.text).toBe(201);
    expect(Object.keys(r.body).sort()).toStrictEqual(['active', 'created_at', 'events', 'id', 'url']);
    expect(r.body.url).toBe('https://hooks.example.com/in');
    expect(r.body.events).toStrictEqual(['user.login', 'user.locked']);
    expect(r.body.active).toBe(true);
    expect(!Number.isNaN(Date.parse(r.body.created_at))).toBeTruthy();
    expect(!r.text.includes(SECRET)).toBeTruthy();

    const list = await app.http.get('/api/webhooks', { headers: admin });
    expect(list.status).toBe(200);
    const listed = list.body.find((w: { id: number }) => w.id === r.body.id);
    expect(listed.url).toBe('https://hooks.example.com/in');
    expect(!list.text.includes(SECRET), 'the list never shows secrets').toBeTruthy();

    const audit = await app.db.query<{ details: Record<string, unknown> }>(
      `SELECT details FROM audit_log WHERE action = 'webhook.create' AND details->>'webhook_id' = $1`, [String(r.body.id)]);
    expect(audit.rowCount).toBe(1);
    expect(!JSON.stringify(audit.rows[0].details).includes(SECRET), 'nor does the audit log').toBeTruthy();
  });

  it('deletes a webhook, then answers 404 for it', async () => {
    const id = await registerWebhook(app, admin, { url: 'https://hooks.example.com/del', events: ['user.logout'] });
    expect((await app.http.delete(`/api/webhooks/${id}`, { headers: admin })).status).toBe(204);
    const list = await app.http.get('/api/webhooks', { headers: admin });
    expect(list.body.some((w: { id: number }) => w.id === id)).toBe(false);
    const again = await app.http.delete(`/api/webhooks/${id}`, { headers: admin });
    expect(again.status).toBe(404);
    expect(again.body.error).toBe('webhook_not_found');
    const malformed = await app.http.delete('/api/webhooks/not-a-number', { headers: admin });
    expect(malformed.status).toBe(400);
    expect(malformed.body.error).toBe('invalid_id');
    expect((await app.http.get('/api/webhooks/999999/deliveries', { headers: admin })).status).toBe(404);
  });

  it('refuses an unknown event, a non-http(s) URL and a short secret with 400', async () => {
    const bad = [
      { url: 'https://hooks.example.com/a', events: ['user.deleted'], secret: SECRET },
      { url: 'https://hooks.example.com/a', events: [], secret: SECRET },
      { url: 'ftp://hooks.example.com/a', events: ['user.login'], secret: SECRET },
      { url: 'not a url', events: ['user.login'], secret: SECRET },
      { url: 'https://user:pw@hooks.example.com/a', events: ['user.login'], secret: SECRET },
      { url: 'https://hooks.example.com/a', events: ['user.login'], secret: 'fifteen-chars!!' },
      { url: 'https://hooks.example.com/a', events: ['user.login'] },
      { url: 'https://hooks.example.com/a', events: 'user.login', secret: SECRET },
    ];
    for (const body of bad) {
      const r = await app.http.post('/api/webhooks', body, { headers: admin });
      expect(r.status, `${JSON.stringify(body)} -> ${r.text}`).toBe(400);
      expect(typeof r.body.error).toBe('string');
      expect(typeof r.body.message).toBe('string');
    }
    const ok = await app.http.post('/api/webhooks', { url: 'https://hooks.example.com/a', events: ['user.login'], secret: 'sixteen-chars!!!' }, { headers: admin });
    expect(ok.status, 'a 16-character secret is enough').toBe(201);
  });

  it('answers 401 without a signed-in user and 403 for a non-admin on every webhook route', async () => {
    const user = await makeUser(app);
    const login = await app.http.post('/api/login', { username: user.username, password: TEST_PASSWORD });
    const nonAdmin = { authorization: `Bearer ${login.body.token}` };
    const id = await registerWebhook(app, admin, { url: 'https://hooks.example.com/guarded', events: ['user.login'] });
    const body = { url: 'https://hooks.example.com/x', events: ['user.login'], secret: SECRET };
    const routes: Array<[string, string]> = [
      ['post', '/api/webhooks'], ['get', '/api/webhooks'], ['delete', `/api/webhooks/${id}`],
      ['get', `/api/webhooks/${id}/deliveries`], ['post', `/api/webhooks/${id}/deliveries/00000000-0000-4000-8000-000000000000/redeliver`],
    ];
    for (const [method, path] of routes) {
      const call = (headers: Record<string, string>) =>
        method === 'post' ? app.http.post(path, body, { headers }) : method === 'get' ? app.http.get(path, { headers }) : app.http.delete(path, { headers });
      const anonymous = await call({});
      expect(anonymous.status, `${method} ${path}`).toBe(401);
      expect(anonymous.body.error).toBe('unauthenticated');
      const forbidden = await call(nonAdmin);
      expect(forbidden.status, `${method} ${path}`).toBe(403);
      expect(forbidden.body.error).toBe('forbidden');
      const badToken = await call({ authorization: 'Bearer not-a-token' });
      expect(badToken.status, `${method} ${path}`).toBe(401);
    }
    const list = await app.http.get('/api/webhooks', { headers: admin });
    expect(list.body.some((w: { id: number }) => w.id === id), 'the refused DELETE deleted nothing').toBeTruthy();
  });

  it('shows each delivery with its attempts, status codes, errors and times, and redelivers it with the same id', async () => {
    let answer = 503;
    const receiver = await startReceiver(() => answer);
    try {
      const id = await registerWebhook(app, admin, { url: receiver.url, events: ['client.registered'] });
      const created = await app.services.clients.createClient({ name: 'Delivery Log Client', callbackUrl: 'https://c.example/cb' }, { via: 'cli' });
      // with the test backoff (10 s) the first attempt fails and the retry waits
      await receiver.waitFor(() => receiver.received.length === 1);
      let log = await app.http.get(`/api/webhooks/${id}/deliveries`, { headers: admin });
      await eventually(async () => {
        log = await app.http.get(`/api/webhooks/${id}/deliveries`, { headers: admin });
        return log.body[0]?.attempt_log.length === 1;
      });
      expect(log.status).toBe(200);
      expect(log.body.length).toBe(1);
      const [d] = log.body;
      expect(d.event).toBe('client.registered');
      expect(d.status).toBe('pending');
      expect(d.attempts).toBe(1);
      expect(d.last_status_code).toBe(503);
      expect(d.last_error).toBe('HTTP 503');
      expect(Date.parse(d.next_attempt_at) > Date.now(), 'the retry is scheduled in the future').toBeTruthy();
      expect(d.attempt_log[0].attempt).toBe(1);
      expect(d.attempt_log[0].status_code).toBe(503);
      expect(!Number.isNaN(Date.parse(d.attempt_log[0].at))).toBeTruthy();
      expect(typeof d.attempt_log[0].duration_ms).toBe('number');
      expect(d.id).toBe(receiver.received[0].headers['x-auth-delivery']);

      const pending = await app.http.post(`/api/webhooks/${id}/deliveries/${d.id}/redeliver`, undefined, { headers: admin });
      expect(pending.status, 'a delivery still being retried is not redelivered').toBe(409);
      expect(pending.body.error).toBe('delivery_pending');

      // let it finish (as failed) quickly, then redeliver it by hand
      await app.db.query(`UPDATE webhook_deliveries SET status = 'failed', completed_at = now() WHERE id = $1`, [d.id]);
      answer = 200;
      const redelivered = await app.http.post(`/api/webhooks/${id}/deliveries/${d.id}/redeliver`, undefined, { headers: admin });
      expect(redelivered.status, redelivered.text).toBe(202);
      await receiver.waitFor(() => receiver.received.length === 2);
      expect(receiver.received[1].headers['x-auth-delivery'], 'the same delivery id, for the receiver to deduplicate').toBe(d.id);
      expect(receiver.received[1].body.data.client_id).toBe(created.client.client_id);
      await eventually(async () => {
        log = await app.http.get(`/api/webhooks/${id}/deliveries`, { headers: admin });
        return log.body[0].status === 'succeeded';
      });
      expect(log.body[0].last_status_code).toBe(200);
      expect(log.body[0].completed_at).toBeTruthy();

      const unknown = await app.http.post(`/api/webhooks/${id}/deliveries/00000000-0000-4000-8000-000000000000/redeliver`, undefined, { headers: admin });
      expect(unknown.status).toBe(404);
      expect((await app.http.post(`/api/webhooks/${id}/deliveries/nope/redeliver`, undefined, { headers: admin })).status).toBe(404);
    } finally {
      await receiver.close();
    }
  });
});

describe('webhook SSRF guard in production', () => {
  let app: TestApp;
  let admin: Record<string, string>;
  beforeAll(async () => {
    // The delivery-time check is counted over all four attempts: a 10 ms backoff base makes
    // them 10, 40 and 160 ms apart (50 ms made it 1.05 s of waiting).
    app = await startTestApp({ NODE_ENV: 'production', BCRYPT_COST: '10', WEBHOOK_ALLOW_PRIVATE: 'false', WEBHOOK_BACKOFF_MS: '10' });
    admin = await adminHeaders(app);
  });
  afterAll(() => app.close());

  it('refuses metadata, loopback (in any spelling), private and link-local URLs at registration with 400', async () => {
    for (const url of [
      'http://169.254.169.254/', 'http://[::ffff:127.0.0.1]/', 'http://127.0.0.1:8080/', 'http://0x7f000001/', 'http://2130706433/',
      'http://0177.0.0.1/', 'http://[::1]/', 'http://10.0.0.8/', 'http://192.168.0.1/', 'http://100.64.1.1/', 'http://[fd00:ec2::254]/',
      'http://0.0.0.0/', 'http://localhost:9999/hook',
      // IPv4-compatible and NAT64 spellings (the parser turns [::127.0.0.1] into [::7f00:1])
      'http://[::127.0.0.1]:8080/hook', 'http://[::a9fe:a9fe]/', 'http://[::10.0.0.8]/', 'http://[::8.8.8.8]/',
      'http://[64:ff9b::127.0.0.1]/', 'http://[64:ff9b::a9fe:a9fe]/', 'http://[4000::1]/',
    ]) {
      const r = await app.http.post('/api/webhooks', { url, events: ['user.login'], secret: SECRET }, { headers: admin });
      expect(r.status, `${url} -> ${r.text}`).toBe(400);
      expect(r.body.error, url).toBe('url_not_allowed');
    }
    const list = await app.http.get('/api/webhooks', { headers: admin });
    expect(list.body).toStrictEqual([]);
  });

  it('checks again at delivery time after resolving the name, and sends nothing to a private address', async () => {
    const receiver = await startReceiver();
    try {
      // As if the name had resolved to a public address at registration and to loopback now.
      const url = `http://localhost:${receiver.port}/hook`;
      const { rows } = await app.db.query<{ id: number }>(
        `INSERT INTO webhooks (url, events, secret) VALUES ($1, '{client.registered}', $2) RETURNING id`, [url, SECRET]);
      await app.services.clients.createClient({ name: 'SSRF Client', callbackUrl: 'https://c.example/cb' }, { via: 'cli' });
      await eventually(async () => {
        const d = await app.db.query<{ status: string }>('SELECT status FROM webhook_deliveries WHERE webhook_id = $1', [rows[0].id]);
        return d.rows[0]?.status === 'failed';
      }, 10_000, 'the delivery to fail for good');
      const attempts = await app.db.query<{ error: string; status_code: number | null }>(
        'SELECT a.error, a.status_code FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.webhook_id = $1', [rows[0].id]);
      expect(attempts.rowCount).toBe(4);
      for (const a of attempts.rows) {
        expect(a.status_code).toBe(null);
        expect(a.error).toMatch(/refused: .*loopback/);
      }
      expect(receiver.received.length, 'nothing reached the loopback receiver').toBe(0);
    } finally {
      await receiver.close();
    }
  });
});

describe('webhook routes and the user-management rate limit', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ RATE_LIMIT_USER_PER_MIN: '3' });
  });
  afterAll(() => app.close());

  it('limits each administrator to RATE_LIMIT_USER_PER_MIN webhook calls a minute', async () => {
    const admin = await adminHeaders(app);
    for (let i = 0; i < 3; i++) expect((await app.http.get('/api/webhooks', { headers: admin })).status).toBe(200);
    const limited = await app.http.post('/api/webhooks', { url: 'https://hooks.example.com/rl', events: ['user.login'], secret: SECRET }, { headers: admin });
    expect(limited.status).toBe(429);
    expect(limited.body.error).toBe('rate_limited');
    expect(Number(limited.headers['retry-after']) >= 1).toBeTruthy();
    const other = await adminHeaders(app);
    expect((await app.http.get('/api/webhooks', { headers: other })).status, 'counted per user').toBe(200);
  });
});
