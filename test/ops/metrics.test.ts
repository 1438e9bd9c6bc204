import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { startService } from '../../src/service.ts';
import { createMigratedDatabase, startTestApp, TEST_ENV, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { request } from '../helpers/http.ts';
import { parsePrometheus, sampleValue } from './helpers/prometheus.ts';

describe('GET /metrics', () => {
  let app: TestApp;
  beforeAll(async () => {
    // A low per-client validation limit, so a refusal is easy to cause; every test uses its own client.
    app = await startTestApp({ RATE_LIMIT_VALIDATE_PER_MIN: '3', RATE_LIMIT_LOGIN_PER_MIN: '100', WEBHOOK_BACKOFF_MS: '10' });
  });
  afterAll(() => app.close());

  const scrape = async () => {
    const r = await app.metrics.get('/metrics');
    expect(r.status).toBe(200);
    return parsePrometheus(r.text);
  };

  it('answers in the Prometheus text format with process metrics', async () => {
    const r = await app.metrics.get('/metrics');
    expect(r.status).toBe(200);
    expect(r.headers['content-type'] as string).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(r.text).toMatch(/# TYPE http_request_duration_seconds histogram/);
    expect(r.text).toMatch(/# TYPE auth_tokens_issued_total counter/);
    const samples = parsePrometheus(r.text);
    // the CPU counters count from when this app's registry was made: a fresh app may show 0 user seconds
    expect(samples.filter((s) => s.name === 'process_cpu_user_seconds_total').length, 'a process CPU sample').toBe(1);
    expect(sampleValue(samples, 'process_cpu_user_seconds_total')).toBeGreaterThanOrEqual(0);
    expect(sampleValue(samples, 'process_resident_memory_bytes')).toBeGreaterThan(1024 * 1024);
  });

  it('times requests by route pattern and status, never by raw path', async () => {
    const before = await scrape();
    const labels = { method: 'POST', route: '/api/sso/token', status: '401' };
    await app.http.post('/api/sso/token', { client_id: 'nobody', client_secret: 'wrong', username: 'x' });
    const probe = `/api/no-such-thing-${randomUUID()}`;
    await app.http.get(probe);
    const after = await scrape();
    expect(sampleValue(after, 'http_request_duration_seconds_count', labels) - sampleValue(before, 'http_request_duration_seconds_count', labels)).toBe(1);
    expect(sampleValue(after, 'http_request_duration_seconds_bucket', { ...labels, le: '+Inf' }) >= 1).toBeTruthy();
    const unmatched = { method: 'GET', route: 'unmatched', status: '404' };
    expect(sampleValue(after, 'http_request_duration_seconds_count', unmatched) - sampleValue(before, 'http_request_duration_seconds_count', unmatched)).toBe(1);
    expect(after.some((s) => Object.values(s.labels).some((v) => v.includes(probe))), 'the raw path is no label').toBe(false);
  });

  it("times OpenID Connect requests by the provider's route, on the fast path and through Express alike", async () => {
    const before = await scrape();
    const count = (samples: typeof before, labels: Record<string, string>) => sampleValue(samples, 'http_request_duration_seconds_count', labels);
    // the token endpoint on the fast path, and written with a query (then Express serves it)
    const form = { headers: { 'content-type': 'application/x-www-form-urlencoded' } };
    expect((await app.http.post('/oidc/token', 'grant_type=client_credentials', form)).status).toBe(400);
    expect((await app.http.post('/oidc/token?x=1', 'grant_type=client_credentials', form)).status).toBe(400);
    expect((await app.http.get('/oidc/jwks')).status).toBe(200);
    expect((await app.http.get('/oidc/auth/some-interaction-uid')).status).toBeGreaterThanOrEqual(400);
    const probe = `/oidc/no-such-thing-${randomUUID()}`;
    expect((await app.http.get(probe)).status).toBe(404);
    const after = await scrape();
    const delta = (labels: Record<string, string>) => count(after, labels) - count(before, labels);
    expect(delta({ method: 'POST', route: '/oidc/token', status: '400' })).toBe(2);
    expect(delta({ method: 'GET', route: '/oidc/jwks', status: '200' })).toBe(1);
    expect(after.some((s) => s.labels.route === '/oidc/auth/:uid'), 'the resumed authorization by its pattern').toBe(true);
    expect(delta({ method: 'GET', route: 'unmatched', status: '404' })).toBe(1);
    expect(after.some((s) => Object.values(s.labels).some((v) => v.includes('no-such-thing') || v.includes('some-interaction-uid'))), 'the raw path is no label').toBe(false);
  });

  it('counts tokens issued, validated and rejected by reason', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const before = await scrape();
    const issued = await app.http.post('/api/sso/token', { ...client, username: user.username });
    expect(issued.status).toBe(200);
    expect((await app.http.post('/api/sso/validate', { ...client, token: issued.body.token })).status).toBe(200);
    expect((await app.http.post('/api/sso/validate', { ...client, token: issued.body.token })).status).toBe(401);
    expect((await app.http.post('/api/sso/validate', { ...client, token: 'not.a.token' })).status).toBe(401);
    const after = await scrape();
    const delta = (name: string, labels: Record<string, string> = {}) => sampleValue(after, name, labels) - sampleValue(before, name, labels);
    expect(delta('auth_tokens_issued_total', { flow: 'server_to_server' })).toBe(1);
    expect(delta('auth_tokens_validated_total')).toBe(1);
    expect(delta('auth_tokens_rejected_total', { reason: 'token_already_used' })).toBe(1);
    expect(delta('auth_tokens_rejected_total', { reason: 'invalid_token' })).toBe(1);
  });

  it('counts rate-limit refusals by limiter', async () => {
    const client = await makeClient(app);
    const before = sampleValue(await scrape(), 'auth_rate_limited_total', { limiter: 'validate' });
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await app.http.post('/api/sso/validate', { ...client, token: 'x' })).status);
    expect(statuses).toStrictEqual([401, 401, 401, 429, 429]);
    expect(sampleValue(await scrape(), 'auth_rate_limited_total', { limiter: 'validate' }) - before).toBe(2);
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
    expect(sampleValue(after, 'auth_outbox_pending') - sampleValue(before, 'auth_outbox_pending')).toBe(3);
    expect(sampleValue(after, 'auth_db_pool_connections', { state: 'total' }) >= 1).toBeTruthy();
    expect(after.some((s) => s.name === 'auth_db_pool_connections' && s.labels.state === 'waiting')).toBeTruthy();
    await app.db.query('DELETE FROM webhooks WHERE id = $1', [hook.rows[0].id]);
  });

  it('counts login failures by reason and lockouts', async () => {
    const user = await makeUser(app);
    const before = await scrape();
    for (let i = 0; i < 5; i++) {
      // the fifth failure sets the lock and says so (401, locked: true); the next attempt is 423
      expect((await app.http.post('/api/auth/login', { login: user.username, password: `wrong-${i}` })).status).toBe(401);
    }
    expect((await app.http.post('/api/auth/login', { login: user.username, password: user.password })).status).toBe(423);
    const after = await scrape();
    const delta = (name: string, labels: Record<string, string> = {}) => sampleValue(after, name, labels) - sampleValue(before, name, labels);
    expect(delta('auth_login_failures_total', { reason: 'invalid_credentials' })).toBe(5);
    expect(delta('auth_login_failures_total', { reason: 'account_locked' })).toBe(1);
    expect(delta('auth_lockouts_total')).toBe(1);
  });

  it('counts an unknown name, a wrong password and an inactive user as one series, so a scrape reveals no usernames', async () => {
    const user = await makeUser(app);
    const inactive = await makeUser(app, { active: false });
    const failures = (samples: Awaited<ReturnType<typeof scrape>>) =>
      new Map(samples.filter((s) => s.name === 'auth_login_failures_total').map((s) => [JSON.stringify(s.labels), s.value]));
    /** The auth_login_failures_total series a login moved, and by how much. */
    const moved = async (login: string, password: string) => {
      const before = failures(await scrape());
      expect((await app.http.post('/api/auth/login', { login, password })).status).toBe(401);
      const after = failures(await scrape());
      return [...after].filter(([k, v]) => v !== (before.get(k) ?? 0)).map(([k, v]) => [k, v - (before.get(k) ?? 0)]);
    };
    const unknown = await moved(`nobody-${randomUUID()}`, 'whatever-password');
    const wrongPassword = await moved(user.username, 'not-the-password');
    const inactiveUser = await moved(inactive.username, inactive.password);
    expect(unknown).toStrictEqual([[JSON.stringify({ reason: 'invalid_credentials' }), 1]]);
    expect(wrongPassword).toStrictEqual(unknown);
    expect(inactiveUser).toStrictEqual(unknown);
    const reasons = new Set((await scrape()).filter((s) => s.name === 'auth_login_failures_total').map((s) => s.labels.reason));
    for (const precise of ['unknown_user', 'invalid_password', 'user_inactive']) expect(reasons.has(precise), precise).toBe(false);
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
        after = parsePrometheus((await app.metrics.get('/metrics')).text);
      }
      expect(delta(after, 'succeeded')).toBe(1);
      expect(delta(after, 'retry'), 'the failing receiver was retried three times').toBe(3);
      expect(delta(after, 'failed')).toBe(1);
    } finally {
      await app.db.query('DELETE FROM webhooks WHERE id = ANY($1::int[])', [hooks]);
      await new Promise((resolve) => receiver.close(resolve));
    }
  });
});

describe('GET /metrics: the failed client authentication limit', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ RATE_LIMIT_CLIENT_AUTH_FAILURES_PER_MIN: '2', TRUST_PROXY: 'loopback' });
  });
  afterAll(() => app.close());

  it('counts its 429s as limiter client_auth (found by a review helper: they went uncounted)', async () => {
    const client = await makeClient(app, { allowedIps: ['198.51.100.0/24'] });
    const address = `198.51.100.${1 + Math.floor(Math.random() * 250)}`; // its own budget, refused only here
    const scrape = async () => sampleValue(parsePrometheus((await app.metrics.get('/metrics')).text), 'auth_rate_limited_total', { limiter: 'client_auth' });
    const before = await scrape();
    const token = (secret: string) => app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: secret, username: 'x' }, { headers: { 'x-forwarded-for': address } });
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await token('wrong')).status);
    statuses.push((await token(client.client_secret)).status); // the right secret is served (no user x)
    expect(statuses).toStrictEqual([401, 401, 429, 429, 404]);
    expect(await scrape() - before).toBe(2);
  });
});

describe('metrics on a listener of their own', () => {
  it('the public port answers /metrics as any unknown page, in any case and with a trailing slash', async () => {
    const app = await startTestApp();
    try {
      const unknown = await app.http.get('/no-such-page');
      for (const p of ['/metrics', '/METRICS', '/metrics/', '/metrics?x=1']) {
        const r = await app.http.get(p);
        expect(r.status, p).toBe(404);
        expect(r.headers['content-type'], p).toBe(unknown.headers['content-type']);
        expect(r.text, p).not.toMatch(/auth_|process_|# TYPE/);
      }
      expect((await app.metrics.get('/metrics')).status, 'the metrics handler serves them').toBe(200);
      expect((await app.metrics.get('/api/health')).status, 'and nothing else').toBe(404);
      expect((await app.metrics.post('/metrics', {})).status).toBe(405);
    } finally {
      await app.close();
    }
  });

  it('startService serves Prometheus text on METRICS_PORT at METRICS_HOST, and stops it with the service', async () => {
    const database = await createMigratedDatabase();
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-metrics-'));
    const config = loadConfig({ ...TEST_ENV, DATA_DIR: dataDir, METRICS_PORT: '0', METRICS_HOST: '127.0.0.1' });
    const running = await startService(config, database.db, pino({ level: 'silent' }));
    try {
      expect(running.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(running.metricsUrl).not.toBe(running.url);
      const scraped = await request(`${running.metricsUrl}/metrics`);
      expect(scraped.status).toBe(200);
      expect(scraped.headers['content-type'] as string).toMatch(/^text\/plain; version=0\.0\.4/);
      expect(scraped.text).toMatch(/# TYPE auth_lockouts_total counter/);
      expect((await request(`${running.url}/metrics`)).status, 'the public port').toBe(404);
      expect((await request(`${running.url}/healthz`)).status).toBe(200);
    } finally {
      await running.stop();
    }
    await expect(request(`${running.metricsUrl}/metrics`), 'closed with the service').rejects.toThrow(/ECONNREFUSED/);
    await database.drop();
  });

  it('with METRICS_TOKEN a missing or wrong bearer token is 401, the right one 200', async () => {
    const token = 'metrics-token-0123456789';
    const app = await startTestApp({ METRICS_TOKEN: token });
    try {
      const missing = await app.metrics.get('/metrics');
      expect(missing.status).toBe(401);
      expect(missing.headers['www-authenticate']).toBe('Bearer realm="metrics"');
      expect(missing.text).not.toMatch(/auth_/);
      for (const authorization of [`Bearer ${token}x`, `Bearer ${token.slice(0, -1)}`, `Basic ${Buffer.from(`x:${token}`).toString('base64')}`, token]) {
        expect((await app.metrics.get('/metrics', { headers: { authorization } })).status, authorization).toBe(401);
      }
      const right = await app.metrics.get('/metrics', { headers: { authorization: `Bearer ${token}` } });
      expect(right.status).toBe(200);
      expect(right.text).toMatch(/# TYPE http_request_duration_seconds histogram/);
    } finally {
      await app.close();
    }
  });
});
