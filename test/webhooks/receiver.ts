import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestApp } from '../helpers/app.ts';
import { makeUser, TEST_PASSWORD } from '../helpers/factories.ts';

/** One request the receiver got. */
export interface Received {
  /** performance.now() when the last byte arrived. */
  at: number;
  headers: http.IncomingHttpHeaders;
  raw: string;
  /** The sender's end of the connection it came on (address:port), to tell connections apart. */
  connection: string;
  body: { event: string; timestamp: string; data: Record<string, any> };
}

/**
 * A real webhook receiver on 127.0.0.1 and a random port. `respond` decides each answer
 * (default 200); every request is recorded with its raw body.
 */
export async function startReceiver(respond: (r: Received, index: number) => number | Promise<number> = () => 200) {
  const received: Received[] = [];
  const waiters = new Set<() => void>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: Received['body'];
      try {
        body = JSON.parse(raw);
      } catch {
        body = { event: '', timestamp: '', data: {} };
      }
      const r = { at: performance.now(), headers: req.headers, raw, connection: `${req.socket.remoteAddress}:${req.socket.remotePort}`, body };
      received.push(r);
      const status = await respond(r, received.length - 1);
      res.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
      for (const w of waiters) w();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    received,
    /** Requests for one event type. */
    of: (event: string) => received.filter((r) => r.body.event === event),
    /** Resolves once `predicate` holds, rejects after `timeoutMs` with what arrived. */
    waitFor(predicate: () => boolean, timeoutMs = 10_000): Promise<void> {
      if (predicate()) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!predicate()) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out; received: ${JSON.stringify(received.map((r) => r.body.event))}`));
        }, timeoutMs);
        waiters.add(check);
      });
    },
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

export type Receiver = Awaited<ReturnType<typeof startReceiver>>;

/**
 * A receiver that holds its first `held` requests (each received at once) until `open()`, then
 * answers them; every request is answered `status(index)`: an attempt kept in flight while the
 * test changes what it concerns.
 */
export async function startHeldReceiver(held = 1, status: (index: number) => number = () => 200): Promise<Receiver & { open: () => void }> {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const receiver = await startReceiver(async (_, index) => {
    if (index < held) await gate;
    return status(index);
  });
  return { ...receiver, open };
}

/** Headers of an administrator signed in through POST /api/login (bearer access token). */
export async function adminHeaders(app: TestApp): Promise<Record<string, string>> {
  const admin = await makeUser(app, { role: 'admin' });
  const login = await app.http.post('/api/login', { username: admin.username, password: TEST_PASSWORD });
  if (login.status !== 200) throw new Error(`admin login failed: ${login.status} ${login.text}`);
  return { authorization: `Bearer ${login.body.token}` };
}

/** Registers a webhook over the API and returns its id. */
export async function registerWebhook(
  app: TestApp,
  headers: Record<string, string>,
  body: { url: string; events: string[]; secret?: string },
): Promise<number> {
  const r = await app.http.post('/api/webhooks', { secret: 'a-webhook-secret-of-some-length', ...body }, { headers });
  if (r.status !== 201) throw new Error(`webhook registration failed: ${r.status} ${r.text}`);
  return r.body.id;
}

/** Polls `check` until it returns true (for database state); fails after `timeoutMs`. */
export async function eventually(check: () => Promise<boolean>, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
