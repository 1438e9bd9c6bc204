import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loggableUrl } from '../../src/logging/request-log.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { request } from '../helpers/http.ts';
import { startLoggedApp, type LoggedApp } from './helpers/logged-app.ts';

/** A value planted in a request that must never show up in the log. */
const canary = (kind: string) => `CANARY${kind}${Math.random().toString(36).slice(2, 10)}`;

describe('structured request logs', () => {
  let app: LoggedApp;
  beforeAll(async () => {
    app = await startLoggedApp();
  });
  afterAll(() => app.close());

  const waitForLine = async (requestId: string) => {
    // The line is written on 'finish', which may land just after the client has the answer.
    for (let i = 0; i < 200 && !app.entries().some((e) => e.req?.id === requestId); i++) await new Promise((r) => setTimeout(r, 10));
    return app.entries().filter((e) => e.req?.id === requestId);
  };

  it('writes one JSON line per request with its id, method, status and route', async () => {
    const r = await app.http.get('/healthz');
    const id = r.headers['x-request-id'] as string;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    const [line] = await waitForLine(id);
    expect(line, 'a log line carries the request id').toBeTruthy();
    expect(line.req.method).toBe('GET');
    expect(line.req.url).toBe('/healthz');
    expect(line.res.statusCode).toBe(200);
    expect(typeof line.responseTime).toBe('number');
  });

  it('reuses a sane incoming X-Request-Id and replaces an unsafe one', async () => {
    const sane = await app.http.get('/healthz', { headers: { 'x-request-id': 'lb-7f3a.12:trace' } });
    expect(sane.headers['x-request-id']).toBe('lb-7f3a.12:trace');
    for (const bad of ['has space', 'x'.repeat(200), '"quoted"', '../etc']) {
      const r = await app.http.get('/healthz', { headers: { 'x-request-id': bad } });
      expect(r.headers['x-request-id'] as string, `replaces ${JSON.stringify(bad)}`).toMatch(/^[0-9a-f-]{36}$/);
    }
  });

  it('never logs passwords, secrets, tokens, codes, cookies, authorization headers or token query strings', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const planted: string[] = [];
    const plant = (kind: string) => {
      const v = canary(kind);
      planted.push(v);
      return v;
    };
    const ids: string[] = [];
    const track = <T extends { headers: Record<string, unknown> }>(r: T) => {
      ids.push(r.headers['x-request-id'] as string);
      return r;
    };

    // A real token: issued, then validated; neither it nor its signature may be logged.
    const issued = track(await app.http.post('/api/sso/token', { ...client, username: user.username }));
    expect(issued.status, issued.text).toBe(200);
    const token = issued.body.token as string;
    track(await app.http.post('/api/sso/validate', { ...client, token }, { headers: { authorization: `Bearer ${plant('bearer')}` } }));
    // Wrong secrets and tokens in JSON bodies.
    track(await app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: plant('secret'), username: user.username }));
    track(await app.http.post('/api/sso/validate', { ...client, token: plant('token') }));
    // Sign-in bodies: password, TOTP and recovery codes (routes of the sign-in capability).
    track(await app.http.post('/api/auth/login', { login: user.username, password: plant('password'), totp: plant('totp') }));
    track(await app.http.post('/api/auth/login', { login: user.username, password: plant('password'), recovery_code: plant('recovery') }));
    track(await app.http.post('/api/login', { username: user.username, password: plant('apipassword'), code: plant('code') }));
    // Credentials in headers.
    track(await app.http.get('/api/user', {
      headers: { authorization: `Bearer ${plant('bearer')}`, cookie: `connect.sid=${plant('cookie')}; other=${plant('cookie')}` },
    }));
    // The browser redirect carries ?token=; also nested in a return URL and in a code parameter.
    track(await app.http.get(`/sso/callback?token=${plant('querytoken')}&state=abc`));
    track(await app.http.get(`/sso/login?client_id=${client.client_id}&return_to=${encodeURIComponent(`https://x.example/?token=${plant('nested')}`)}`));
    track(await app.http.get(`/api/sso/validate?token=${token}`));
    // A login form body, and a malformed JSON body holding a password.
    track(await request(`${await app.listen()}/sso/login?client_id=${client.client_id}`, {
      method: 'POST',
      body: `login=${user.username}&password=${plant('formpassword')}&totp=${plant('formtotp')}`,
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `sid=${plant('formcookie')}` },
    }));
    track(await request(`${await app.listen()}/api/auth/login`, {
      method: 'POST',
      body: `{"login":"x","password":"${plant('malformed')}"`,
      headers: { 'content-type': 'application/json' },
    }));

    // Secrets an administrator sends: a new user's password, a webhook signing secret, a client's secret in the answer.
    const admin = await makeUser(app, { role: 'admin' });
    const access = (await app.http.post('/api/login', { username: admin.username, password: admin.password })).body.token as string;
    planted.push(access);
    const asAdmin = { headers: { authorization: `Bearer ${access}` } };
    track(await app.http.post('/api/admin/users', { username: `u${Date.now()}`, email: `u${Date.now()}@example.com`, password: plant('newuserpassword') }, asAdmin));
    track(await app.http.post('/api/webhooks', { url: 'https://hooks.example/x', events: ['user.login'], secret: plant('webhooksecret') }, asAdmin));
    const created = track(await app.http.post('/api/admin/clients', { client_name: 'Canary', callback_url: 'https://canary.example/cb' }, asAdmin));
    expect(created.status, created.text).toBe(201);
    planted.push(created.body.client_secret);

    for (const id of ids) expect((await waitForLine(id)).length >= 1, `request ${id} was logged`).toBeTruthy();
    const output = app.lines.join('');
    for (const value of [...planted, token, token.split('.')[2], client.client_secret]) {
      expect(output.includes(value), `the log must not contain ${value.slice(0, 16)}…`).toBe(false);
    }
    const redirectLine = (await waitForLine(ids[8]))[0];
    expect(redirectLine.req.url).toBe('/sso/callback?[redacted]');
  });

  it('keeps harmless query strings and strips credential-bearing ones', () => {
    expect(loggableUrl('/api/admin/audit?user=alice&limit=10')).toBe('/api/admin/audit?user=alice&limit=10');
    expect(loggableUrl('/cb?token=abc')).toBe('/cb?[redacted]');
    expect(loggableUrl('/cb?next=%2Fx%3Ftoken%3Dabc')).toBe('/cb?[redacted]');
    expect(loggableUrl('/cb?x=%E0%A4%A')).toBe('/cb?[redacted]');
  });

  it('puts the request id in 5xx bodies and the error log line, without request secrets', async () => {
    const client = await makeClient(app);
    const secret = canary('fivehundred');
    // Break the store under the running service so the next token request fails inside.
    await app.db.exec('ALTER TABLE clients RENAME TO clients_moved_away');
    try {
      const r = await app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: secret, username: 'x' }, {
        headers: { 'x-request-id': 'req-500-check' },
      });
      expect(r.status).toBe(500);
      expect(r.body).toStrictEqual({ error: 'internal_error', message: 'Internal server error', request_id: 'req-500-check' });
      expect(r.headers['x-request-id']).toBe('req-500-check');
      const lines = await waitForLine('req-500-check');
      expect(lines.some((l) => l.level >= 50 && l.res?.statusCode === 500), 'an error-level request line').toBeTruthy();
      expect(app.entries().some((e) => e.requestId === 'req-500-check' && e.err?.message), 'the error is logged with its id').toBeTruthy();
      expect(app.lines.join('').includes(secret)).toBe(false);
    } finally {
      await app.db.exec('ALTER TABLE clients_moved_away RENAME TO clients');
    }
  });
});

/** What a hostile or broken client can send must never read as a failure of the service. */
describe('client mistakes in the log', () => {
  let app: LoggedApp;
  let server: http.Server;
  let port: number;
  beforeAll(async () => {
    app = await startLoggedApp();
    server = http.createServer(app.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await app.close();
  });

  it('a body the client stops sending is no outage: no 503, no "service unavailable" warning', async () => {
    const socket = net.connect(port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write('POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\nX-Request-Id: req-aborted-body\r\n\r\n{"login":"a"');
    await new Promise((r) => setTimeout(r, 100));
    socket.destroy();
    for (let i = 0; i < 200 && !app.entries().some((e) => e.req?.id === 'req-aborted-body'); i++) await new Promise((r) => setTimeout(r, 10));
    const lines = app.entries().filter((e) => e.req?.id === 'req-aborted-body' || e.requestId === 'req-aborted-body');
    expect(lines.length, 'the request was logged').toBeGreaterThan(0);
    expect(lines.filter((e) => e.outage !== undefined || e.res?.statusCode === 503), JSON.stringify(lines)).toStrictEqual([]);
    expect(app.entries().filter((e) => e.msg === 'service unavailable')).toStrictEqual([]);
  });

  it('a dashboard form with a NUL in its client id, from anyone, is refused without a 500 or an error logged', async () => {
    const r = await request(`http://127.0.0.1:${port}/dashboard/link`, {
      method: 'POST', body: 'client_id=a%00b&external_username=x', headers: { accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(r.status, r.text.slice(0, 200)).toBeLessThan(500);
    expect(app.entries().filter((e) => e.level >= 50).map((e) => e.msg)).toStrictEqual([]);
  });
});
