import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { gracefulCloser, InFlight } from '../../src/http/graceful-close.ts';
import { httpMetrics } from '../../src/metrics/http.ts';
import { createMetrics } from '../../src/metrics/metrics.ts';

/** Waits (2 s at most) until `check` holds; its last value either way. */
async function eventually(check: () => boolean | Promise<boolean>): Promise<boolean> {
  const until = Date.now() + 2_000;
  while (!(await check()) && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
  return check();
}

/**
 * Two GETs written at once on one connection: the second is queued behind the first (which
 * the server never answers), then the connection is cut. `arrived` resolves once the server
 * has seen both.
 */
function pipelineThenCut(port: number, arrived: Promise<void>): Promise<void> {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => {});
  socket.write('GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /queued HTTP/1.1\r\nHost: x\r\n\r\n');
  return arrived.then(() => {
    socket.destroy();
  });
}

/**
 * gracefulCloser on a real server: the responses still to be written when `close` is called
 * carry `Connection: close`, whichever requests came and went before (the in-flight list has
 * to drop a response from its head, its middle and its tail without losing the others).
 */
describe('gracefulCloser', () => {
  const cleanups: Array<() => void> = [];
  afterEach(() => {
    for (const c of cleanups.splice(0)) c();
  });

  it('marks exactly the responses in flight at close, after others left from the head, middle and tail', async () => {
    const held = new Map<string, () => void>();
    let arrived!: () => void;
    let arrivals = 0;
    const allArrived = new Promise<void>((resolve) => (arrived = resolve));
    const server = http.createServer((req, res) => {
      held.set(req.url!, () => res.end(req.url));
      if (++arrivals === 6) arrived();
    });
    const closer = gracefulCloser(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 10 });
    cleanups.push(() => agent.destroy(), () => server.closeAllConnections(), () => server.close());
    const ask = (path: string) => new Promise<{ path: string; connection: string | undefined }>((resolve, reject) => {
      http.get({ host: '127.0.0.1', port, path, agent }, (res) => {
        res.resume();
        res.on('end', () => resolve({ path, connection: res.headers.connection }));
      }).on('error', reject);
    });

    const paths = ['/1', '/2', '/3', '/4', '/5', '/6'];
    const answers = new Map<string, Promise<{ path: string; connection: string | undefined }>>();
    for (const p of paths) {
      answers.set(p, ask(p));
      // one at a time, so they enter the list in this order
      while (!held.has(p)) await new Promise((r) => setTimeout(r, 5));
    }
    await allArrived;
    // Leave from the middle, the first in and the last in, before the close.
    for (const p of ['/3', '/1', '/6']) {
      held.get(p)!();
      expect((await answers.get(p)!).connection, `${p} answered before the close`).toBe('keep-alive');
    }

    const closed = closer.close(5_000);
    for (const p of ['/2', '/4', '/5']) held.get(p)!();
    const late = await Promise.all(['/2', '/4', '/5'].map((p) => answers.get(p)!));
    for (const a of late) expect(a.connection, `${a.path} was in flight at the close`).toBe('close');
    agent.destroy();
    await closed;
  });

  it('forgets a pipelined request whose connection was cut while it waited behind another', async () => {
    let seen = 0;
    let bothArrived!: () => void;
    const arrived = new Promise<void>((resolve) => (bothArrived = resolve));
    const server = http.createServer(() => {
      if (++seen === 2) bothArrived(); // neither is answered
    });
    const closer = gracefulCloser(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => server.close());
    await pipelineThenCut((server.address() as AddressInfo).port, arrived);
    expect(await eventually(() => closer.inFlight() === 0), `still in flight: ${closer.inFlight()}`).toBe(true);
  });

  it('keeps the list in step with a Set through a long run of adds and deletes', () => {
    const list = new InFlight();
    const reference = new Set<http.ServerResponse>();
    const pool = Array.from({ length: 12 }, () => new http.ServerResponse(new http.IncomingMessage(new net.Socket())));
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let step = 0; step < 5_000; step++) {
      const res = pool[Math.floor(random() * pool.length)];
      if (reference.has(res) && random() < 0.6) {
        list.delete(res);
        reference.delete(res);
      } else if (!reference.has(res)) {
        list.add(res);
        reference.add(res);
      } else {
        list.delete(res);
        list.delete(res); // a second delete changes nothing
        reference.delete(res);
      }
      const visited: http.ServerResponse[] = [];
      list.forEach((r) => visited.push(r));
      expect(new Set(visited), `step ${step}`).toStrictEqual(reference);
      expect(visited.length).toBe(reference.size);
      expect(list.size).toBe(reference.size);
    }
  });
});

describe('the in-flight gauge', () => {
  it('comes back down for a pipelined request whose connection was cut while it waited', async () => {
    const metrics = createMetrics();
    const timeRequest = httpMetrics(metrics);
    let seen = 0;
    let bothArrived!: () => void;
    const arrived = new Promise<void>((resolve) => (bothArrived = resolve));
    const server = http.createServer((req, res) => {
      timeRequest(req as never, res as never, () => {});
      if (++seen === 2) bothArrived();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const gauge = async () => (await metrics.httpInFlight.get()).values[0]?.value ?? 0;
      await pipelineThenCut((server.address() as AddressInfo).port, arrived);
      expect(await eventually(async () => (await gauge()) === 0), `gauge: ${await gauge()}`).toBe(true);
    } finally {
      server.close();
    }
  });
});
