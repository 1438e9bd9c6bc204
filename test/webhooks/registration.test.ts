import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser, TEST_PASSWORD } from '../helpers/factories.ts';
import { adminHeaders, eventually, registerWebhook, startReceiver } from './receiver.ts';

const SECRET = 'registration-secret-0123456789';

describe('webhook registration API', () => {
  let app: TestApp;
  let admin: Record<string, string>;
  before(async () => {
    app = await startTestApp();
    admin = await adminHeaders(app);
  });
  after(() => app.close());

  it('registers a webhook: 201 with id, url, events, active, created_at and never the secret', async () => {
    const r = await app.http.post('/api/webhooks', { url: 'https://hooks.example.com/in', events: ['user.login', 'user.locked'], secret: SECRET }, { headers: admin });
    assert.equal(r.status, 201, r.text);
    assert.deepEqual(Object.keys(r.body).sort(), ['active', 'created_at', 'events', 'id', 'url']);
    assert.equal(r.body.url, 'https://hooks.example.com/in');
    assert.deepEqual(r.body.events, ['user.login', 'user.locked']);
    assert.equal(r.body.active, true);
    assert.ok(!Number.isNaN(Date.parse(r.body.created_at)));
    assert.ok(!r.text.includes(SECRET));

    const list = await app.http.get('/api/webhooks', { headers: admin });
    assert.equal(list.status, 200);
    const listed = list.body.find((w: { id: number }) => w.id === r.body.id);
    assert.equal(listed.url, 'https://hooks.example.com/in');
    assert.ok(!list.text.includes(SECRET), 'the list never shows secrets');

    const audit = await app.db.query<{ details: Record<string, unknown> }>(
      `SELECT details FROM audit_log WHERE action = 'webhook.create' AND details->>'webhook_id' = $1`, [String(r.body.id)]);
    assert.equal(audit.rowCount, 1);
    assert.ok(!JSON.stringify(audit.rows[0].details).includes(SECRET), 'nor does the audit log');
  });

  it('deletes a webhook, then answers 404 for it', async () => {
    const id = await registerWebhook(app, admin, { url: 'https://hooks.example.com/del', events: ['user.logout'] });
    assert.equal((await app.http.delete(`/api/webhooks/${id}`, { headers: admin })).status, 204);
    const list = await app.http.get('/api/webhooks', { headers: admin });
    assert.equal(list.body.some((w: { id: number }) => w.id === id), false);
    const again = await app.http.delete(`/api/webhooks/${id}`, { headers: admin });
    assert.equal(again.status, 404);
    assert.equal(again.body.error, 'webhook_not_found');
    assert.equal((await app.http.delete('/api/webhooks/not-a-number', { headers: admin })).status, 404);
    assert.equal((await app.http.get('/api/webhooks/999999/deliveries', { headers: admin })).status, 404);
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
      assert.equal(r.status, 400, `${JSON.stringify(body)} -> ${r.text}`);
      assert.equal(typeof r.body.error, 'string');
      assert.equal(typeof r.body.message, 'string');
    }
    const ok = await app.http.post('/api/webhooks', { url: 'https://hooks.example.com/a', events: ['user.login'], secret: 'sixteen-chars!!!' }, { headers: admin });
    assert.equal(ok.status, 201, 'a 16-character secret is enough');
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
      assert.equal(anonymous.status, 401, `${method} ${path}`);
      assert.equal(anonymous.body.error, 'unauthenticated');
      const forbidden = await call(nonAdmin);
      assert.equal(forbidden.status, 403, `${method} ${path}`);
      assert.equal(forbidden.body.error, 'forbidden');
      const badToken = await call({ authorization: 'Bearer not-a-token' });
      assert.equal(badToken.status, 401, `${method} ${path}`);
    }
    const list = await app.http.get('/api/webhooks', { headers: admin });
    assert.ok(list.body.some((w: { id: number }) => w.id === id), 'the refused DELETE deleted nothing');
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
      assert.equal(log.status, 200);
      assert.equal(log.body.length, 1);
      const [d] = log.body;
      assert.equal(d.event, 'client.registered');
      assert.equal(d.status, 'pending');
      assert.equal(d.attempts, 1);
      assert.equal(d.last_status_code, 503);
      assert.equal(d.last_error, 'HTTP 503');
      assert.ok(Date.parse(d.next_attempt_at) > Date.now(), 'the retry is scheduled in the future');
      assert.equal(d.attempt_log[0].attempt, 1);
      assert.equal(d.attempt_log[0].status_code, 503);
      assert.ok(!Number.isNaN(Date.parse(d.attempt_log[0].at)));
      assert.equal(typeof d.attempt_log[0].duration_ms, 'number');
      assert.equal(d.id, receiver.received[0].headers['x-auth-delivery']);

      const pending = await app.http.post(`/api/webhooks/${id}/deliveries/${d.id}/redeliver`, undefined, { headers: admin });
      assert.equal(pending.status, 409, 'a delivery still being retried is not redelivered');
      assert.equal(pending.body.error, 'delivery_pending');

      // let it finish (as failed) quickly, then redeliver it by hand
      await app.db.query(`UPDATE webhook_deliveries SET status = 'failed', completed_at = now() WHERE id = $1`, [d.id]);
      answer = 200;
      const redelivered = await app.http.post(`/api/webhooks/${id}/deliveries/${d.id}/redeliver`, undefined, { headers: admin });
      assert.equal(redelivered.status, 202, redelivered.text);
      await receiver.waitFor(() => receiver.received.length === 2);
      assert.equal(receiver.received[1].headers['x-auth-delivery'], d.id, 'the same delivery id, for the receiver to deduplicate');
      assert.equal(receiver.received[1].body.data.client_id, created.client.client_id);
      await eventually(async () => {
        log = await app.http.get(`/api/webhooks/${id}/deliveries`, { headers: admin });
        return log.body[0].status === 'succeeded';
      });
      assert.equal(log.body[0].last_status_code, 200);
      assert.ok(log.body[0].completed_at);

      const unknown = await app.http.post(`/api/webhooks/${id}/deliveries/00000000-0000-4000-8000-000000000000/redeliver`, undefined, { headers: admin });
      assert.equal(unknown.status, 404);
      assert.equal((await app.http.post(`/api/webhooks/${id}/deliveries/nope/redeliver`, undefined, { headers: admin })).status, 404);
    } finally {
      await receiver.close();
    }
  });
});

describe('webhook SSRF guard in production', () => {
  let app: TestApp;
  let admin: Record<string, string>;
  before(async () => {
    app = await startTestApp({ NODE_ENV: 'production', WEBHOOK_ALLOW_PRIVATE: 'false', WEBHOOK_BACKOFF_MS: '50' });
    admin = await adminHeaders(app);
  });
  after(() => app.close());

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
      assert.equal(r.status, 400, `${url} -> ${r.text}`);
      assert.equal(r.body.error, 'url_not_allowed', url);
    }
    const list = await app.http.get('/api/webhooks', { headers: admin });
    assert.deepEqual(list.body, []);
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
      assert.equal(attempts.rowCount, 4);
      for (const a of attempts.rows) {
        assert.equal(a.status_code, null);
        assert.match(a.error, /refused: .*loopback/);
      }
      assert.equal(receiver.received.length, 0, 'nothing reached the loopback receiver');
    } finally {
      await receiver.close();
    }
  });
});

describe('webhook routes and the user-management rate limit', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp({ RATE_LIMIT_USER_PER_MIN: '3' });
  });
  after(() => app.close());

  it('limits each administrator to RATE_LIMIT_USER_PER_MIN webhook calls a minute', async () => {
    const admin = await adminHeaders(app);
    for (let i = 0; i < 3; i++) assert.equal((await app.http.get('/api/webhooks', { headers: admin })).status, 200);
    const limited = await app.http.post('/api/webhooks', { url: 'https://hooks.example.com/rl', events: ['user.login'], secret: SECRET }, { headers: admin });
    assert.equal(limited.status, 429);
    assert.equal(limited.body.error, 'rate_limited');
    assert.ok(Number(limited.headers['retry-after']) >= 1);
    const other = await adminHeaders(app);
    assert.equal((await app.http.get('/api/webhooks', { headers: other })).status, 200, 'counted per user');
  });
});
