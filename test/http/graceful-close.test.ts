import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { gracefulCloser } from '../../src/http/graceful-close.ts';

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
    cleanups.push(() => agent.destroy(), () => server.closeAllConnections());
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
});
