import { randomInt } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres } from '../../src/db/postgres.ts';
import { outageCause } from '../../src/http/unavailable.ts';
import { createLogger } from '../../src/logging/logger.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase, onPostgres } from '../helpers/db.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { startAppBehindProxy } from '../helpers/proxied-app.ts';
import { freePort } from '../helpers/http.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';

type Fixture = { client: Awaited<ReturnType<typeof makeClient>>; user: Awaited<ReturnType<typeof makeUser>> };

/** A logger whose lines the test reads. */
function capturedLogger() {
  const lines: string[] = [];
  const logger = createLogger('info', { write: (s: string) => void lines.push(s) });
  return { logger, entries: () => lines.map((l) => JSON.parse(l) as Record<string, any>) };
}

const creds = (c: Fixture['client']) => ({ client_id: c.client_id, client_secret: c.client_secret });

/** Token issue, validation, both logins and a page: every one must answer as an outage. */
async function expectOutageAnswers(app: TestApp, f: Fixture, token: string) {
  const calls: Array<[string, unknown]> = [
    ['/api/sso/token', { ...creds(f.client), username: f.user.username }],
    ['/api/sso/validate', { ...creds(f.client), token }],
    ['/api/validate-token', { ...creds(f.client), token }],
    ['/api/auth/login', { login: f.user.username, password: f.user.password }],
    ['/api/login', { username: f.user.username, password: f.user.password }],
  ];
  for (const [path, body] of calls) {
    const r = await app.http.post(path, body);
    expect(r.status, `${path}: ${r.text}`).toBe(503);
    expect(r.body.error, path).toBe('service_unavailable');
    expect(typeof r.body.message).toBe('string');
    expect(Number(r.headers['retry-after']), `${path} carries Retry-After`).toBeGreaterThan(0);
  }
  // a page that reads the database: the client system the browser is sent from
  const page = await app.http.get(`/sso/login?client_id=${encodeURIComponent(f.client.client_id)}`, { headers: { accept: 'text/html' } });
  expect(page.status).toBe(503);
  expect(page.headers['content-type']).toMatch(/text\/html/);
  expect(page.text).toMatch(/try again/i);
  expect(Number(page.headers['retry-after'])).toBeGreaterThan(0);
}

/** The log of an outage: warnings naming the cause, never an error, never a stack. */
function expectOutageLog(entries: Array<Record<string, any>>) {
  const warnings = entries.filter((e) => e.msg === 'service unavailable');
  expect(warnings.length).toBeGreaterThan(0);
  for (const w of warnings) {
    expect(w.level, 'warn').toBe(40);
    expect(typeof w.outage).toBe('string');
    expect(JSON.stringify(w)).not.toMatch(/"stack"/);
  }
  expect(entries.filter((e) => e.level >= 50).map((e) => e.msg), 'nothing logged as an error').toStrictEqual([]);
}

describe.skipIf(!onPostgres && 'PostgreSQL only')('a PostgreSQL outage', () => {
  let proxy: TcpProxy;
  let app: TestApp;
  let close: () => Promise<void>;
  let log: ReturnType<typeof capturedLogger>;
  let f: Fixture;
  beforeAll(async () => {
    log = capturedLogger();
    // The service's pool reaches PostgreSQL only through the proxy; a short connect bound so
    // the "hanging server" case answers quickly. A sweep every 100 ms: the background work
    // meets the outage too.
    ({ app, proxy, close } = await startAppBehindProxy({ TOKEN_SWEEP_INTERVAL_MS: '100' }, { pool: { connectTimeoutMs: 1000 }, logger: log.logger }));
    f = { client: await makeClient(app), user: await makeUser(app) };
  });
  afterAll(() => close());

  it('answers token, validation and login with 503 and Retry-After, then succeeds again within a second of recovery', async () => {
    const issued = await app.http.post('/api/sso/token', { ...creds(f.client), username: f.user.username });
    expect(issued.status).toBe(200);

    await proxy.cut(); // PostgreSQL is gone: connections dropped, new ones refused
    await expectOutageAnswers(app, f, issued.body.token);
    const sweepFailed = () => log.entries().find((e) => e.msg?.startsWith('token expiry sweep failed'));
    for (let i = 0; i < 100 && !sweepFailed(); i++) await new Promise((r) => setTimeout(r, 50));
    expect(sweepFailed(), 'the background sweep met the outage').toBeTruthy();
    expect(sweepFailed()!.level).toBe(40);
    expect(typeof sweepFailed()!.outage, 'a cause, not an error with a stack').toBe('string');
    expect(sweepFailed()!.err).toBe(undefined);
    expectOutageLog(log.entries());

    await proxy.restore();
    const deadline = Date.now() + 1000;
    let last = 0;
    while (Date.now() < deadline) {
      last = (await app.http.post('/api/sso/token', { ...creds(f.client), username: f.user.username })).status;
      if (last === 200) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(last, 'a token is issued within a second of PostgreSQL coming back').toBe(200);
    // the token refused during the outage was never consumed
    const validated = await app.http.post('/api/sso/validate', { ...creds(f.client), token: issued.body.token });
    expect(validated.status, validated.text).toBe(200);
    expect((await app.http.post('/api/login', { username: f.user.username, password: f.user.password })).status).toBe(200);
  });

  it('answers 503 when PostgreSQL accepts connections but never answers', async () => {
    proxy.block();
    try {
      const r = await app.http.post('/api/sso/token', { ...creds(f.client), username: f.user.username });
      expect(r.status, r.text).toBe(503);
      expect(r.body.error).toBe('service_unavailable');
      expect(r.headers['retry-after']).toBeTruthy();
      const ready = await app.http.get('/readyz');
      expect(ready.status).toBe(503);
    } finally {
      await proxy.restore();
    }
  });
});

describe.skipIf(!onPostgres && 'PostgreSQL only')('a connection lost inside a transaction', () => {
  it('fails the transaction as an outage instead of crashing the process, and the pool goes on', async () => {
    const t = await createTestDatabase();
    await t.db.close();
    const target = new URL(t.url!);
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const db = openPostgres(proxy.urlFor(t.url!));
    try {
      const err = await db.transaction(async (tx) => {
        await tx.query('SELECT 1');
        await proxy.cut(); // the connection goes while the transaction holds it, between statements
        await new Promise((r) => setTimeout(r, 100)); // unheard, its 'error' event would be an uncaught exception here
        return tx.query('SELECT 1');
      }).then(() => null, (e: unknown) => e);
      expect(outageCause(err), String(err)).not.toBe(null);
      await proxy.restore();
      const r = await db.query<{ one: number }>('SELECT 1 AS one');
      expect(r.rows[0].one).toBe(1);
    } finally {
      await db.close();
      await proxy.close();
      await t.drop();
    }
  });
});

describe('an embedded database that is closed', () => {
  it('answers token, validation and login with 503 and Retry-After, logged as a warning', async () => {
    const log = capturedLogger();
    const app = await startTestApp({}, { logger: log.logger });
    try {
      const f = { client: await makeClient(app), user: await makeUser(app) };
      const issued = await app.http.post('/api/sso/token', { ...creds(f.client), username: f.user.username });
      expect(issued.status, issued.text).toBe(200);
      const reference = (await app.http.get('/api/openapi.json')).body;
      for (const [path, method] of [['/api/sso/token', 'post'], ['/api/sso/validate', 'post'], ['/api/auth/login', 'post'], ['/api/login', 'post']]) {
        expect(reference.paths[path][method].responses['503'], `${path} documents the outage answer`).toBeTruthy();
      }
      await app.db.close();
      await expectOutageAnswers(app, f, issued.body.token);
      expectOutageLog(log.entries());
    } finally {
      await app.close().catch(() => {});
    }
  });
});

describe('a Redis outage', () => {
  it('refuses rate-limited requests with 503 instead of letting them through unlimited', async () => {
    const log = capturedLogger();
    const port = await freePort(); // nothing listens there: Redis is down
    const app = await startTestApp({ REDIS_URL: `redis://127.0.0.1:${port}` }, { logger: log.logger });
    try {
      const f = { client: await makeClient(app), user: await makeUser(app) };
      const login = await app.http.post('/api/auth/login', { login: f.user.username, password: f.user.password });
      expect(login.status, login.text).toBe(503);
      expect(login.body.error).toBe('service_unavailable');
      expect(login.headers['retry-after']).toBeTruthy();
      expect(login.headers['set-cookie'], 'no session was started').toBe(undefined);
      const issued = await app.http.post('/api/sso/token', { ...creds(f.client), username: f.user.username });
      expect(issued.status, 'token issue is limited per client: without Redis it is refused too').toBe(503);
      expect(issued.body.error).toBe('service_unavailable');
      // a token issued in-process (the limiter is the HTTP route's): its validation is refused as well
      const record = (await app.services.clients.findClient(f.client.client_id))!;
      const { token } = await app.services.sso.issueByUsername(record, f.user.username, { ipAddress: '127.0.0.1', userAgent: null, tokenIp: undefined });
      const validated = await app.http.post('/api/sso/validate', { ...creds(f.client), token });
      expect(validated.status, validated.text).toBe(503);
      expectOutageLog(log.entries());
    } finally {
      await app.close();
    }
  });
});

describe.skipIf(!process.env.TEST_REDIS_URL && 'TEST_REDIS_URL not set')('a Redis outage and its end', () => {
  it('refuses logins with 503 while Redis is down from the start, and limits again once it is back', async () => {
    const target = new URL(process.env.TEST_REDIS_URL!);
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 6379) });
    await proxy.cut(); // Redis is down when the service starts
    const app = await startTestApp({ REDIS_URL: proxy.urlFor(process.env.TEST_REDIS_URL!), RATE_LIMIT_LOGIN_PER_MIN: '2' });
    try {
      const user = await makeUser(app);
      // a random loopback source address: the counter lives in the shared Redis for a minute,
      // and a run repeated within it (CI runs both databases back to back) must not inherit it
      const from = `127.${randomInt(1, 255)}.${randomInt(0, 256)}.${randomInt(1, 255)}`;
      const attempt = () => app.http.post('/api/auth/login', { login: user.username, password: 'wrong password' }, { localAddress: from });
      expect((await attempt()).status).toBe(503);
      await proxy.restore();
      let status = 0;
      for (let i = 0; i < 100 && status !== 401; i++) {
        status = (await attempt()).status;
        if (status !== 401) await new Promise((r) => setTimeout(r, 50));
      }
      expect(status, 'the limiter works again once Redis is back').toBe(401);
      // the limit holds: the counter lives in Redis again
      const statuses = [(await attempt()).status, (await attempt()).status];
      expect(statuses).toContain(429);
    } finally {
      await app.close();
      await proxy.close();
    }
  });
});
