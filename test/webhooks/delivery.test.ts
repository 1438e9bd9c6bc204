import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { Worker } from 'node:worker_threads';
import { createMigratedTestDatabase, onPostgres } from '../helpers/db.ts';
import { verifyWebhook } from '../../src/webhooks/verify.ts';
import { adminHeaders, eventually, registerWebhook, sleep, startReceiver } from './receiver.ts';

const SECRET = 'delivery-secret-0123456789';

/** Registers a client (which emits client.registered) and returns its id. */
async function triggerClientRegistered(app: TestApp): Promise<string> {
  const { client } = await app.services.clients.createClient({ name: unique('Hook Client '), callbackUrl: 'https://c.example/cb' }, { via: 'cli' });
  return client.client_id;
}

async function deliveryRow(app: TestApp, webhookId: number) {
  const r = await app.db.query<{ id: string; status: string; attempts: number; last_status_code: number | null; last_error: string | null }>(
    'SELECT id, status, attempts, last_status_code, last_error FROM webhook_deliveries WHERE webhook_id = $1', [webhookId]);
  return r.rows;
}

describe('webhook delivery and retries', () => {
  let app: TestApp;
  let admin: Record<string, string>;
  // A second instance, on a database of its own, whose retries follow a 10 ms backoff base
  // (10, 40, 160 ms instead of 100, 400, 1600) and whose attempts time out after 500 ms:
  // for the tests that count attempts to the last one and need no particular gap between
  // them. The gaps themselves are measured on `app`, whose 100 ms base keeps them well apart
  // from scheduling delays on a busy machine.
  let quick: TestApp;
  let quickAdmin: Record<string, string>;
  beforeAll(async () => {
    [app, quick] = await Promise.all([
      startTestApp({ WEBHOOK_BACKOFF_MS: '100', WEBHOOK_TIMEOUT_MS: '1000' }),
      startTestApp({ WEBHOOK_BACKOFF_MS: '10', WEBHOOK_TIMEOUT_MS: '500' }),
    ]);
    [admin, quickAdmin] = await Promise.all([adminHeaders(app), adminHeaders(quick)]);
  });
  afterAll(() => Promise.all([app?.close(), quick?.close()]));

  it('sends within milliseconds of the commit, signed, with the documented headers', async () => {
    const receiver = await startReceiver();
    try {
      const id = await registerWebhook(app, admin, { url: receiver.url, events: ['client.registered'], secret: SECRET });
      const delays: number[] = [];
      const clientIds: string[] = [];
      for (let i = 0; i < 10; i++) {
        const started = performance.now();
        clientIds.push(await triggerClientRegistered(app));
        await receiver.waitFor(() => receiver.received.length === i + 1);
        delays.push(receiver.received[i].at - started);
        // Let the dispatcher go idle (attempt recorded), so the next event is not picked up
        // by a claim already under way but by the wake (or, without it, the poll).
        await eventually(async () => (await deliveryRow(app, id)).every((d) => d.status === 'succeeded'));
        await sleep(50);
      }
      // The commit wakes the dispatcher: were we waiting for the 500 ms poll instead, most
      // of these would take 100-500 ms.
      const median = [...delays].sort((x, y) => x - y)[5];
      expect(median < 100, `median ${median.toFixed(1)} ms from commit to receipt (${delays.map((d) => d.toFixed(0)).join(', ')})`).toBeTruthy();
      const r = receiver.received[9];
      expect(r.headers['content-type']).toBe('application/json');
      expect(r.headers['x-auth-event']).toBe('client.registered');
      expect(String(r.headers['x-auth-delivery'])).toMatch(/^[0-9a-f-]{36}$/);
      expect(r.headers['webhook-id']).toBe(r.headers['x-auth-delivery']);
      const envelope = verifyWebhook(r.raw, r.headers, SECRET);
      expect(Object.keys(envelope)).toStrictEqual(['event', 'timestamp', 'data']);
      expect(envelope.data.client_id).toBe(clientIds[9]);
      expect(envelope.timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    } finally {
      await receiver.close();
    }
  });

  it('keeps the connection to a receiver open between deliveries', async () => {
    const receiver = await startReceiver();
    try {
      const id = await registerWebhook(app, admin, { url: receiver.url, events: ['client.registered'], secret: SECRET });
      for (let i = 0; i < 5; i++) {
        await triggerClientRegistered(app);
        await receiver.waitFor(() => receiver.received.length === i + 1);
        // Recorded means the answer was read to its end, so the connection is free again.
        await eventually(async () => (await deliveryRow(app, id)).filter((d) => d.status === 'succeeded').length === i + 1);
      }
      const connections = new Set(receiver.received.map((r) => r.connection));
      expect(connections.size, `five deliveries on one connection, not ${connections.size}`).toBe(1);
    } finally {
      await receiver.close();
    }
  });

  it('delivers every event to a receiver that closes each connection after answering', async () => {
    const connections = new Set<string>();
    let received = 0;
    const closing = http.createServer((req, res) => {
      connections.add(`${req.socket.remotePort}`);
      req.resume();
      req.on('end', () => {
        received++;
        res.writeHead(200, { connection: 'close' }).end('ok');
      });
    });
    await new Promise<void>((resolve) => closing.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(closing.address() as AddressInfo).port}/hook`;
      const id = await registerWebhook(app, admin, { url, events: ['client.registered'], secret: SECRET });
      for (let i = 0; i < 4; i++) {
        await triggerClientRegistered(app);
        await eventually(async () => (await deliveryRow(app, id)).filter((d) => d.status === 'succeeded').length === i + 1);
      }
      const rows = await deliveryRow(app, id);
      expect(rows.map((d) => [d.status, d.attempts]), 'each delivered at the first attempt').toStrictEqual(rows.map(() => ['succeeded', 1]));
      expect(received).toBe(4);
      expect(connections.size, 'a connection the receiver closed is never used again').toBe(4);
    } finally {
      closing.closeAllConnections();
      closing.close();
    }
  });

  it.skipIf(!onPostgres && 'the embedded database lives in the main thread')('on PostgreSQL, delivers from its own thread while the main thread is busy', async () => {
    // The receiver runs on a thread of its own too, so only the dispatcher's thread can be the sender.
    const receiverThread = new Worker(`
      const http = require('node:http');
      const { parentPort } = require('node:worker_threads');
      const server = http.createServer((req, res) => {
        req.resume();
        req.on('end', () => { parentPort.postMessage({ receivedAt: Date.now() }); res.end('ok'); });
      });
      server.listen(0, '127.0.0.1', () => parentPort.postMessage({ port: server.address().port }));
    `, { eval: true });
    const messages: Array<{ port?: number; receivedAt?: number }> = [];
    receiverThread.on('message', (m) => messages.push(m));
    try {
      await eventually(async () => messages.some((m) => m.port), 5000, 'the receiver thread');
      const port = messages.find((m) => m.port)!.port;
      await registerWebhook(app, admin, { url: `http://127.0.0.1:${port}/hook`, events: ['client.registered'], secret: SECRET });
      await triggerClientRegistered(app);
      // Hold the main thread's event loop for 1.5 s right after the commit woke the dispatcher.
      const busyUntil = Date.now() + 1500;
      while (Date.now() < busyUntil);
      await eventually(async () => messages.some((m) => m.receivedAt), 5000, 'the delivery');
      const receivedAt = messages.find((m) => m.receivedAt)!.receivedAt!;
      expect(receivedAt < busyUntil - 1000, `delivered ${busyUntil - receivedAt} ms before the main thread was free again`).toBeTruthy();
    } finally {
      await receiverThread.terminate();
    }
  });

  it.skipIf(!onPostgres && 'the embedded database has no connections to drop')('on PostgreSQL, keeps delivering after the database has dropped every connection', async () => {
    const receiver = await startReceiver();
    try {
      const id = await registerWebhook(app, admin, { url: receiver.url, events: ['client.registered'], secret: SECRET });
      await triggerClientRegistered(app);
      await receiver.waitFor(() => receiver.received.length === 1);
      await eventually(async () => (await deliveryRow(app, id)).every((d) => d.status === 'succeeded'));
      // A restart or failover of PostgreSQL: every session of this database ends, the
      // dispatcher thread's included (all but the one asking).
      const dropped = await app.db.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()) t');
      expect(dropped.rows[0].n >= 1, 'the dispatcher thread had a connection to drop').toBeTruthy();
      await sleep(100);
      for (let i = 0; i < 3; i++) await triggerClientRegistered(app);
      await receiver.waitFor(() => receiver.received.length === 4);
      await eventually(async () => (await deliveryRow(app, id)).every((d) => d.status === 'succeeded' && d.attempts === 1));
    } finally {
      await receiver.close();
    }
  });

  it('a receiver that fails twice then answers 200 gets exactly 3 attempts, growing gaps, one delivery id', async () => {
    const receiver = await startReceiver((_r, i) => (i < 2 ? 500 : 200));
    try {
      const id = await registerWebhook(app, admin, { url: receiver.url, events: ['client.registered'], secret: SECRET });
      await triggerClientRegistered(app);
      await receiver.waitFor(() => receiver.received.length === 3);
      await eventually(async () => (await deliveryRow(app, id))[0]?.status === 'succeeded');
      await sleep(700); // longer than the next backoff step would be: nothing more arrives
      expect(receiver.received.length).toBe(3);
      const [a, b, c] = receiver.received;
      const gap1 = b.at - a.at;
      const gap2 = c.at - b.at;
      expect(gap1 >= 85, `first retry after the base backoff (${gap1} ms)`).toBeTruthy();
      expect(gap2 > gap1, `gaps grow (${gap1} ms, then ${gap2} ms)`).toBeTruthy();
      expect(gap2 >= 340, `second retry about 4x later (${gap2} ms)`).toBeTruthy();
      expect(new Set(receiver.received.map((r) => r.headers['x-auth-delivery'])).size).toBe(1);
      // each attempt is re-signed with its own timestamp, and every one verifies
      expect(new Set(receiver.received.map((r) => r.body.timestamp)).size).toBe(3);
      for (const r of receiver.received) verifyWebhook(r.raw, r.headers, SECRET);
      const [row] = await deliveryRow(app, id);
      expect({ status: row.status, attempts: row.attempts, code: row.last_status_code }).toStrictEqual({ status: 'succeeded', attempts: 3, code: 200 });
      const attempts = await app.db.query<{ attempt: number; status_code: number }>(
        'SELECT attempt, status_code FROM webhook_attempts WHERE delivery_id = $1 ORDER BY id', [row.id]);
      expect(attempts.rows.map((x) => [x.attempt, x.status_code])).toStrictEqual([[1, 500], [2, 500], [3, 200]]);
    } finally {
      await receiver.close();
    }
  });

  it('a receiver that always fails gets exactly 4 attempts, then the delivery is failed', async () => {
    const receiver = await startReceiver(() => 502);
    try {
      const id = await registerWebhook(quick, quickAdmin, { url: receiver.url, events: ['client.registered'], secret: SECRET });
      await triggerClientRegistered(quick);
      await eventually(async () => (await deliveryRow(quick, id))[0]?.status === 'failed', 15_000, 'the delivery to fail');
      await sleep(700); // a fifth attempt would come 64 x 10 ms after the fourth
      expect(receiver.received.length).toBe(4);
      const [row] = await deliveryRow(quick, id);
      expect({ attempts: row.attempts, code: row.last_status_code, error: row.last_error }).toStrictEqual({ attempts: 4, code: 502, error: 'HTTP 502' });
    } finally {
      await receiver.close();
    }
  });

  it('a 410 answer disables the webhook and stops its deliveries', async () => {
    const receiver = await startReceiver(() => 410);
    try {
      const id = await registerWebhook(app, admin, { url: receiver.url, events: ['client.registered'], secret: SECRET });
      await triggerClientRegistered(app);
      await eventually(async () => (await deliveryRow(app, id))[0]?.status === 'failed');
      const list = await app.http.get('/api/webhooks', { headers: admin });
      const hook = list.body.find((w: { id: number }) => w.id === id);
      expect(hook.active).toBe(false);
      expect(hook.disabled_reason).toMatch(/410/);
      await triggerClientRegistered(app);
      await sleep(700);
      expect(receiver.received.length, 'no retry and no new delivery to a disabled webhook').toBe(1);
      expect((await deliveryRow(app, id)).length).toBe(1);
    } finally {
      await receiver.close();
    }
  });

  it('ends a delivery whose webhook was disabled while an attempt was under way', async () => {
    let webhookId = 0;
    // An administrator disables the webhook while the first attempt is in flight.
    const receiver = await startReceiver(async () => {
      await app.db.query('UPDATE webhooks SET active = false WHERE id = $1', [webhookId]);
      return 500;
    });
    try {
      webhookId = await registerWebhook(app, admin, { url: receiver.url, events: ['client.registered'], secret: SECRET });
      await triggerClientRegistered(app);
      await eventually(async () => (await deliveryRow(app, webhookId))[0]?.status === 'failed');
      await sleep(400); // past the first retry time
      expect(receiver.received.length, 'no retry to a disabled webhook').toBe(1);
      const [row] = await deliveryRow(app, webhookId);
      expect([row.attempts, row.last_status_code]).toStrictEqual([1, 500]);
    } finally {
      await receiver.close();
    }
  });

  it('treats a timeout, a redirect and a refused connection as failures; reads only a small part of a huge answer', async () => {
    const hits = { slow: 0, redirect: 0, target: 0, huge: 0 };
    const server = http.createServer((req, res) => {
      req.resume();
      if (req.url === '/slow') {
        hits.slow++;
        setTimeout(() => res.writeHead(200).end(), 3000).unref();
      } else if (req.url === '/redirect') {
        hits.redirect++;
        res.writeHead(307, { location: '/target' }).end();
      } else if (req.url === '/target') {
        hits.target++;
        res.writeHead(200).end();
      } else if (req.url === '/huge') {
        hits.huge++;
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        // an endless answer: the attempt must end anyway
        const chunk = Buffer.alloc(64 * 1024, 1);
        const pump = () => { while (res.write(chunk)) { /* fill */ } };
        res.on('drain', pump);
        pump();
      }
    });
    server.on('clientError', () => {});
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const refusedUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}/gone`;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    try {
      // On `quick`: four attempts of each, 500 ms timeout each for the slow one (which answers
      // after 3 s), and 210 ms of backoff between them instead of 2.1 s.
      const slow = await registerWebhook(quick, quickAdmin, { url: `${base}/slow`, events: ['client.registered'] });
      const redirect = await registerWebhook(quick, quickAdmin, { url: `${base}/redirect`, events: ['client.registered'] });
      const huge = await registerWebhook(quick, quickAdmin, { url: `${base}/huge`, events: ['client.registered'] });
      const refused = await registerWebhook(quick, quickAdmin, { url: refusedUrl, events: ['client.registered'] });
      await triggerClientRegistered(quick);
      await eventually(async () => {
        const rows = await quick.db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = ANY($1) AND status = 'pending'`, [[slow, redirect, refused]]);
        return rows.rows[0].n === 0;
      }, 20_000, 'the failing deliveries to finish');
      const [s] = await deliveryRow(quick, slow);
      expect([s.status, s.attempts]).toStrictEqual(['failed', 4]);
      expect(String(s.last_error)).toMatch(/timeout after 500 ms/);
      const [r] = await deliveryRow(quick, redirect);
      expect([r.status, r.attempts, r.last_status_code]).toStrictEqual(['failed', 4, 307]);
      expect(hits.target, 'the redirect was never followed').toBe(0);
      const [c] = await deliveryRow(quick, refused);
      expect([c.status, c.attempts, c.last_status_code]).toStrictEqual(['failed', 4, null]);
      expect(String(c.last_error)).toMatch(/ECONNREFUSED/);
      const [h] = await deliveryRow(quick, huge);
      expect([h.status, h.attempts, h.last_status_code], 'a 2xx counts once its head arrives; the rest is not read').toStrictEqual(['succeeded', 1, 200]);
      expect(hits.huge).toBe(1);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('webhook deliveries across a restart', () => {
  it('stopping the service between attempts and starting it again loses nothing', async () => {
    const database = await createMigratedTestDatabase();
    // Retries 500 ms (±10%) after a failure: the first instance stops before most are due,
    // and any made before the stop fail again and stay pending all the same.
    const env = { WEBHOOK_BACKOFF_MS: '500' };
    let answer = 500;
    const receiver = await startReceiver(() => answer);
    let first: TestApp | undefined;
    let second: TestApp | undefined;
    try {
      first = await startTestApp(env, { db: database.db });
      const admin = await adminHeaders(first);
      const id = await registerWebhook(first, admin, { url: receiver.url, events: ['client.registered'], secret: SECRET });
      // several events, each failed once and waiting for its retry when the instance stops
      const clientIds: string[] = [];
      for (let i = 0; i < 5; i++) clientIds.push(await triggerClientRegistered(first));
      await receiver.waitFor(() => new Set(receiver.received.map((r) => r.headers['x-auth-delivery'])).size === 5);
      await first.stop();
      first = undefined;
      const seenWhileStopped = receiver.received.length;
      await sleep(800); // past the retry time: nobody is running to send it
      expect(receiver.received.length, 'a stopped instance sends nothing').toBe(seenWhileStopped);
      const pending = await deliveryRow({ db: database.db } as TestApp, id);
      expect(pending.length).toBe(5);
      expect(pending.every((d) => d.status === 'pending'), 'all retries still pending in the database').toBeTruthy();
      expect(pending.every((d) => d.attempts >= 1 && d.last_status_code === 500), 'the attempts in flight at stop were finished and recorded').toBeTruthy();

      answer = 200;
      second = await startTestApp(env, { db: database.db });
      await eventually(async () => (await deliveryRow(second!, id)).every((d) => d.status === 'succeeded'), 10_000, 'all deliveries to succeed');
      const delivered = new Map<string, string>();
      for (const r of receiver.received) delivered.set(String(r.headers['x-auth-delivery']), r.body.data.client_id);
      expect([...delivered.values()].sort(), 'every event arrived, with its data').toStrictEqual([...clientIds].sort());
      const rows = await deliveryRow(second, id);
      for (const d of rows) {
        const perDelivery = receiver.received.filter((r) => r.headers['x-auth-delivery'] === d.id);
        expect(d.attempts >= 2, 'failed before the restart, succeeded after').toBeTruthy();
        expect(perDelivery.length, 'every attempt recorded, none repeated').toBe(d.attempts);
        expect(d.last_status_code).toBe(200);
      }
    } finally {
      await first?.stop();
      await second?.stop();
      await receiver.close();
      await database.drop();
    }
  });
});
