import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { request } from '../helpers/http.ts';
import { parsePrometheus, sampleValue } from './helpers/prometheus.ts';

describe('GET /metrics', () => {
  let app: TestApp;
  before(async () => {
    // A low per-client validation limit, so a refusal is easy to cause; every test uses its own client.
    app = await startTestApp({ RATE_LIMIT_VALIDATE_PER_MIN: '3', RATE_LIMIT_LOGIN_PER_MIN: '100', WEBHOOK_BACKOFF_MS: '10' });
  });
  after(() => app.close());

  const scrape = async () => {
    const r = await app.http.get('/metrics');
    assert.equal(r.status, 200);
    return parsePrometheus(r.text);
  };

  it('answers in the Prometheus text format with process metrics', async () => {
    const r = await app.http.get('/metrics');
    assert.equal(r.status, 200);
    assert.match(r.headers['content-type'] as string, /^text\/plain; version=0\.0\.4/);
    assert.match(r.text, /# TYPE http_request_duration_seconds histogram/);
    assert.match(r.text, /# TYPE auth_tokens_issued_total counter/);
    assert.ok(sampleValue(parsePrometheus(r.text), 'process_cpu_user_seconds_total') > 0);
  });

  it('times requests by route pattern and status, never by raw path', async () => {
    const before = await scrape();
    const labels = { method: 'POST', route: '/api/sso/token', status: '401' };
    await app.http.post('/api/sso/token', { client_id: 'nobody', client_secret: 'wrong', username: 'x' });
    const probe = `/api/no-such-thing-${randomUUID()}`;
    await app.http.get(probe);
    const after = await scrape();
    assert.equal(sampleValue(after, 'http_request_duration_seconds_count', labels) - sampleValue(before, 'http_request_duration_seconds_count', labels), 1);
    assert.ok(sampleValue(after, 'http_request_duration_seconds_bucket', { ...labels, le: '+Inf' }) >= 1);
    const unmatched = { method: 'GET', route: 'unmatched', status: '404' };
    assert.equal(sampleValue(after, 'http_request_duration_seconds_count', unmatched) - sampleValue(before, 'http_request_duration_seconds_count', unmatched), 1);
    assert.equal(after.some((s) => Object.values(s.labels).some((v) => v.includes(probe))), false, 'the raw path is no label');
  });

  it('counts tokens issued, validated and rejected by reason', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const before = await scrape();
    const issued = await app.http.post('/api/sso/token', { ...client, username: user.username });
    assert.equal(issued.status, 200);
    assert.equal((await app.http.post('/api/sso/validate', { ...client, token: issued.body.token })).status, 200);
    assert.equal((await app.http.post('/api/sso/validate', { ...client, token: issued.body.token })).status, 401);
    assert.equal((await app.http.post('/api/sso/validate', { ...client, token: 'not.a.token' })).status, 401);
    const after = await scrape();
    const delta = (name: string, labels: Record<string, string> = {}) => sampleValue(after, name, labels) - sampleValue(before, name, labels);
    assert.equal(delta('auth_tokens_issued_total', { flow: 'server_to_server' }), 1);
    assert.equal(delta('auth_tokens_validated_total'), 1);
    assert.equal(delta('auth_tokens_rejected_total', { reason: 'token_already_used' }), 1);
    assert.equal(delta('auth_tokens_rejected_total', { reason: 'invalid_token' }), 1);
  });

  it('counts rate-limit refusals by limiter', async () => {
    const client = await makeClient(app);
    const before = sampleValue(await scrape(), 'auth_rate_limited_total', { limiter: 'validate' });
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await app.http.post('/api/sso/validate', { ...client, token: 'x' })).status);
    assert.deepEqual(statuses, [401, 401, 401, 429, 429]);
    assert.equal(sampleValue(await scrape(), 'auth_rate_limited_total', { limiter: 'validate' }) - before, 2);
  });

  it('reports the outbox depth and the database pool on each scrape', async () => {
    const before = await scrape();
    const hook = await app.db.query<{ id: number }>(
      "INSERT INTO webhooks (url, events, secret) VALUES ('https://hooks.example/x', ARRAY['client.registered'], 'metrics-test-secret-0123') RETURNING id");
    // Due in an hour, so no dispatcher sends them while the test looks.
    for (let i = 0; i < 3; i++) {
      await app.db.query(
        "INSERT INTO webhook_deliveries (id, webhook_id, event, data, next_attempt_at) VALUES ($1, $2, 'client.registered', '{}', now() + interval '1 hour')",
        [randomUUID(), hook.rows[0].id],
      );
    }
    const after = await scrape();
    assert.equal(sampleValue(after, 'auth_outbox_pending') - sampleValue(before, 'auth_outbox_pending'), 3);
    assert.ok(sampleValue(after, 'auth_db_pool_connections', { state: 'total' }) >= 1);
    assert.ok(after.some((s) => s.name === 'auth_db_pool_connections' && s.labels.state === 'waiting'));
    await app.db.query('DELETE FROM webhooks WHERE id = $1', [hook.rows[0].id]);
  });

  it('counts login failures by reason and lockouts', async () => {
    const user = await makeUser(app);
    const before = await scrape();
    for (let i = 0; i < 5; i++) {
      assert.equal((await app.http.post('/api/auth/login', { login: user.username, password: `wrong-${i}` })).status, 401);
    }
    assert.equal((await app.http.post('/api/auth/login', { login: user.username, password: user.password })).status, 423);
    const after = await scrape();
    const delta = (name: string, labels: Record<string, string> = {}) => sampleValue(after, name, labels) - sampleValue(before, name, labels);
    assert.equal(delta('auth_login_failures_total', { reason: 'invalid_credentials' }), 5);
    assert.equal(delta('auth_login_failures_total', { reason: 'account_locked' }), 1);
    assert.equal(delta('auth_lockouts_total'), 1);
  });

  it('counts an unknown name, a wrong password and an inactive user as one series, so a scrape reveals no usernames', async () => {
    const user = await makeUser(app);
    const inactive = await makeUser(app, { active: false });
    const failures = (samples: Awaited<ReturnType<typeof scrape>>) =>
      new Map(samples.filter((s) => s.name === 'auth_login_failures_total').map((s) => [JSON.stringify(s.labels), s.value]));
    /** The auth_login_failures_total series a login moved, and by how much. */
    const moved = async (login: string, password: string) => {
      const before = failures(await scrape());
      assert.equal((await app.http.post('/api/auth/login', { login, password })).status, 401);
      const after = failures(await scrape());
      return [...after].filter(([k, v]) => v !== (before.get(k) ?? 0)).map(([k, v]) => [k, v - (before.get(k) ?? 0)]);
    };
    const unknown = await moved(`nobody-${randomUUID()}`, 'whatever-password');
    const wrongPassword = await moved(user.username, 'not-the-password');
    const inactiveUser = await moved(inactive.username, inactive.password);
    assert.deepEqual(unknown, [[JSON.stringify({ reason: 'invalid_credentials' }), 1]]);
    assert.deepEqual(wrongPassword, unknown);
    assert.deepEqual(inactiveUser, unknown);
    const reasons = new Set((await scrape()).filter((s) => s.name === 'auth_login_failures_total').map((s) => s.labels.reason));
    for (const precise of ['unknown_user', 'invalid_password', 'user_inactive']) assert.equal(reasons.has(precise), false, precise);
  });

  it('counts webhook delivery attempts by outcome', async () => {
    const receiver = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(req.url === '/ok' ? 200 : 500).end());
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    const hooks: number[] = [];
    try {
      for (const path of ['/ok', '/fail']) {
        const r = await app.db.query<{ id: number }>(
          "INSERT INTO webhooks (url, events, secret) VALUES ($1, ARRAY['client.registered'], 'metrics-test-secret-0123') RETURNING id", [base + path]);
        hooks.push(r.rows[0].id);
      }
      const before = await scrape();
      await makeClient(app); // client.registered, to both receivers
      const delta = (s: Awaited<ReturnType<typeof scrape>>, outcome: string) =>
        sampleValue(s, 'auth_webhook_deliveries_total', { outcome }) - sampleValue(before, 'auth_webhook_deliveries_total', { outcome });
      let after = before;
      for (let i = 0; i < 500 && delta(after, 'failed') < 1; i++) {
        await new Promise((r) => setTimeout(r, 20));
        after = parsePrometheus((await request(`${app.url}/metrics`)).text);
      }
      assert.equal(delta(after, 'succeeded'), 1);
      assert.equal(delta(after, 'retry'), 3, 'the failing receiver was retried three times');
      assert.equal(delta(after, 'failed'), 1);
    } finally {
      await app.db.query('DELETE FROM webhooks WHERE id = ANY($1::int[])', [hooks]);
      await new Promise((resolve) => receiver.close(resolve));
    }
  });
});
