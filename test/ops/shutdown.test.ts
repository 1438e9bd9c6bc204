import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeClient, makeUser } from '../helpers/factories.ts';
import type { TestApp } from '../helpers/app.ts';
import { request } from '../helpers/http.ts';
import { prepareServerEnv, seed, startServerProcess, type ServerProcess } from './helpers/child-service.ts';
import { parsePrometheus, sampleValue } from './helpers/prometheus.ts';

/** A POST whose body is sent in two halves, so it is in flight for as long as we hold the second. */
function slowPost(url: string, body: object, agent: http.Agent) {
  const payload = Buffer.from(JSON.stringify(body));
  const half = Math.floor(payload.length / 2);
  const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': String(payload.length) } });
  const response = new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: any }>((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(text) }));
    });
    req.on('error', reject);
  });
  req.write(payload.subarray(0, half));
  return { response, finish: () => req.end(payload.subarray(half)) };
}

/** Resolves once the port refuses connections: the server has stopped accepting. */
async function waitUntilRefused(port: number) {
  for (;;) {
    const refused = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(false);
      });
      s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ECONNREFUSED'));
    });
    if (refused) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A webhook receiver on a free port of 127.0.0.1: its URL, and `close`. */
async function startReceiver(handle: http.RequestListener): Promise<{ hookUrl: string; close(): Promise<unknown> }> {
  const receiver = http.createServer(handle);
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  return {
    hookUrl: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`,
    close: () => new Promise((resolve) => receiver.close(resolve)),
  };
}

/** A client, a user and a webhook of user.login to `hookUrl`; the body of a token request for them. */
function seedTokenIssue(env: Record<string, string>, hookUrl: string) {
  return seed(env, async (services) => {
    const app = { services } as unknown as TestApp;
    const client = await makeClient(app);
    const user = await makeUser(app);
    await services.deps.db.query("INSERT INTO webhooks (url, events, secret) VALUES ($1, ARRAY['user.login'], 'shutdown-test-secret-01')", [hookUrl]);
    return { client_id: client.client_id, client_secret: client.client_secret, username: user.username };
  });
}

/** Resolves once the server counts at least `n` requests in flight, scraped from its metrics listener at `metricsUrl`. */
async function waitInFlight(metricsUrl: string | undefined, n: number): Promise<void> {
  if (!metricsUrl) throw new Error('the server has no metrics listener');
  for (;;) {
    const m = parsePrometheus((await request(`${metricsUrl}/metrics`)).text);
    if (sampleValue(m, 'http_requests_in_flight') >= n) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * The webhook tests each prepare a database, seed it twice and start a server process of their
 * own: on a busy 2-core machine (CI beside two spinning processes), on the embedded database,
 * two of them took 28 and 39 s and the third ran past the suite's 60 s a test.
 */
const PROCESS_TEST_TIMEOUT = 120_000;

describe('graceful shutdown of the real server process', () => {
  let prepared: Awaited<ReturnType<typeof prepareServerEnv>>;
  let server: ServerProcess;
  let creds: { client_id: string; client_secret: string };
  let username: string;
  beforeAll(async () => {
    prepared = await prepareServerEnv();
    ({ creds, username } = await seed(prepared.env, async (services) => {
      const app = { services } as unknown as TestApp;
      const client = await makeClient(app);
      const user = await makeUser(app);
      return { creds: { client_id: client.client_id, client_secret: client.client_secret }, username: user.username };
    }));
    server = await startServerProcess(prepared.env);
  });
  afterAll(async () => {
    if (server.child.exitCode === null) server.child.kill('SIGKILL');
    await prepared.drop();
  });

  it('on SIGTERM under load answers every request it accepted, then exits 0', async () => {
    const port = server.port;
    const body = { ...creds, username };

    // Requests held in flight: headers and half the body sent, on keep-alive connections.
    const agent = new http.Agent({ keepAlive: true });
    const held = Array.from({ length: 4 }, () => slowPost(`${server.url}/api/sso/token`, body, agent));
    await waitInFlight(server.metricsUrl, held.length); // the scrape is on the metrics listener, not counted

    // Background load: complete requests, each on a fresh connection, until the port refuses.
    const answered: number[] = [];
    const refusedOrReset: string[] = [];
    let started = 0;
    const loop = async () => {
      for (;;) {
        started++;
        try {
          answered.push((await request(`${server.url}/api/sso/token`, { body })).status);
        } catch (err) {
          refusedOrReset.push((err as NodeJS.ErrnoException).code ?? String(err));
          return;
        }
      }
    };
    const loops = Array.from({ length: 6 }, loop);
    while (answered.length < 30) await new Promise((r) => setTimeout(r, 10));

    server.child.kill('SIGTERM');
    await waitUntilRefused(port);
    for (const h of held) h.finish();
    const heldAnswers = await Promise.all(held.map((h) => h.response));
    await Promise.all(loops);
    const code = await server.exited;

    for (const a of heldAnswers) {
      expect(a.status, 'a request in flight at SIGTERM is answered').toBe(200);
      expect(typeof a.body.token).toBe('string');
      expect(a.headers.connection, 'the client is told not to reuse the connection').toBe('close');
    }
    expect(answered.length >= 30).toBeTruthy();
    expect([...new Set(answered)], 'every answered request succeeded').toStrictEqual([200]);
    // A request the server never accepted fails to connect; none is cut off mid-answer.
    for (const e of refusedOrReset) expect(['ECONNREFUSED', 'ECONNRESET'].includes(e), e).toBeTruthy();
    expect(code, server.output()).toBe(0);

    // The server's own account: every token request it started, it answered with 200.
    const lines = server.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    const tokenLines = lines.filter((l) => l.req?.url === '/api/sso/token');
    expect(tokenLines.length, 'the server answered exactly what the clients received').toBe(answered.length + held.length);
    expect(tokenLines.every((l) => l.res?.statusCode === 200 && !/aborted/.test(l.msg))).toBeTruthy();
    expect(lines.some((l) => l.msg === 'shutting down' && l.signal === 'SIGTERM')).toBeTruthy();
    expect(lines.some((l) => l.msg === 'stopped')).toBeTruthy();
    agent.destroy();
    expect(started >= answered.length).toBeTruthy();
  });

  it('on SIGTERM sends the webhooks of requests it answers while draining before it exits', async () => {
    const received: string[] = [];
    const receiver = await startReceiver((req, res) => {
      let text = '';
      req.on('data', (c) => (text += c));
      req.on('end', () => {
        received.push(JSON.parse(text).event);
        res.writeHead(200).end('ok');
      });
    });
    const env = await prepareServerEnv();
    const agent = new http.Agent({ keepAlive: true });
    try {
      const body = await seedTokenIssue(env.env, receiver.hookUrl);
      const child = await startServerProcess(env.env);
      const held = slowPost(`${child.url}/api/sso/token`, body, agent);
      await waitInFlight(child.metricsUrl, 1); // the held request
      child.child.kill('SIGTERM');
      await waitUntilRefused(child.port);
      held.finish(); // issued now, while the instance drains: its user.login is handed to the dispatcher
      expect((await held.response).status).toBe(200);
      expect(await child.exited, child.output()).toBe(0);

      expect(received, 'delivered before the exit, not left leased to a stopped dispatcher').toStrictEqual(['user.login']);
      const recorded = await seed(env.env, async (services) =>
        (await services.deps.db.query<{ status: string; attempts: number }>("SELECT status, attempts FROM webhook_deliveries WHERE event = 'user.login'")).rows);
      expect(recorded).toStrictEqual([{ status: 'succeeded', attempts: 1 }]);
    } finally {
      agent.destroy();
      await receiver.close();
      await env.drop();
    }
  }, PROCESS_TEST_TIMEOUT);

  it('on SIGTERM leaves a webhook attempt that outlasts the stop unrecorded, for a later retry, and still exits 0 in time', async () => {
    let arrived!: () => void;
    const delivery = new Promise<void>((resolve) => (arrived = resolve));
    const held: http.ServerResponse[] = [];
    const receiver = await startReceiver((req, res) => {
      req.resume();
      held.push(res); // never answered while the service stops
      arrived();
    });
    const env = await prepareServerEnv();
    try {
      const body = await seedTokenIssue(env.env, receiver.hookUrl);
      // a receiver may take up to a minute to answer; the stop may not
      const child = await startServerProcess({ ...env.env, WEBHOOK_TIMEOUT_MS: '60000' });
      expect((await request(`${child.url}/api/sso/token`, { body: body })).status).toBe(200);
      await delivery;
      const started = Date.now();
      child.child.kill('SIGTERM');
      expect(await child.exited, child.output()).toBe(0);
      expect(Date.now() - started, 'well inside the 25 s before a forced exit').toBeLessThan(20_000);
      if (env.env.DATABASE_URL) {
        // the webhook thread's own limit ends it before the workers' deadline: nothing is left running
        expect(child.output(), 'the thread was terminated, not left').not.toMatch(/still running at shutdown/);
      }
      const recorded = await seed(env.env, async (services) =>
        (await services.deps.db.query<{ status: string; last_status_code: number | null }>(
          "SELECT status, last_status_code FROM webhook_deliveries WHERE event = 'user.login'")).rows);
      expect(recorded, 'no outcome recorded: sent again once its lease ends').toStrictEqual([{ status: 'pending', last_status_code: null }]);
    } finally {
      for (const res of held) res.destroy();
      await receiver.close();
      await env.drop();
    }
  }, PROCESS_TEST_TIMEOUT);

  it('on SIGTERM lets a webhook attempt in progress finish and records it before exiting', async () => {
    // A receiver that holds the delivery until the test lets it answer.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let arrived!: () => void;
    const delivery = new Promise<void>((resolve) => (arrived = resolve));
    const receiver = await startReceiver((req, res) => {
      req.resume();
      arrived();
      void released.then(() => res.writeHead(200).end('ok'));
    });

    const env = await prepareServerEnv();
    try {
      const body = await seedTokenIssue(env.env, receiver.hookUrl);
      const child = await startServerProcess(env.env);
      expect((await request(`${child.url}/api/sso/token`, { body: body })).status).toBe(200);
      await delivery; // the dispatcher's attempt is now waiting for the receiver

      child.child.kill('SIGTERM');
      await waitUntilRefused(child.port);
      expect(child.child.exitCode, 'the process waits for the attempt').toBe(null);
      release();
      expect(await child.exited, child.output()).toBe(0);

      const recorded = await seed(env.env, async (services) =>
        (await services.deps.db.query<{ status: string; attempts: number; last_status_code: number }>(
          "SELECT status, attempts, last_status_code FROM webhook_deliveries WHERE event = 'user.login'")).rows);
      expect(recorded).toStrictEqual([{ status: 'succeeded', attempts: 1, last_status_code: 200 }]);
    } finally {
      release();
      await receiver.close();
      await env.drop();
    }
  }, PROCESS_TEST_TIMEOUT);
});
