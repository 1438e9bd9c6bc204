import type http from 'node:http';
import { whenResponseDone } from './response-done.ts';

/**
 * Lets an HTTP server stop without losing a request: once `close` is called the listening
 * socket is closed (new connections are refused, so a load balancer moves on), idle
 * keep-alive connections are closed, every response still to be written carries
 * `Connection: close` so clients do not reuse a connection that is about to go away, and
 * `close` resolves once the last in-flight request has been answered, or after `timeoutMs`,
 * when whatever is left is cut off.
 */
export function gracefulCloser(server: http.Server): { close(timeoutMs: number): Promise<void>; inFlight(): number } {
  const inFlight = new InFlight();
  let closing = false;
  const markLast = (res: http.ServerResponse) => {
    if (!res.headersSent) res.setHeader('Connection', 'close');
  };
  // Prepended so it runs before the application answers.
  server.prependListener('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (closing) markLast(res);
    inFlight.add(res);
    whenResponseDone(req, res, () => inFlight.delete(res));
  });

  return {
    /** How many requests are being answered. */
    inFlight: () => inFlight.size,
    async close(timeoutMs) {
      closing = true;
      inFlight.forEach(markLast);
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      // A connection whose response just finished, or which was accepted but has not sent a
      // request yet, is idle: close it as soon as it is.
      const sweep = setInterval(() => server.closeIdleConnections(), 50);
      const cutoff = setTimeout(() => server.closeAllConnections(), timeoutMs);
      try {
        await closed;
      } finally {
        clearInterval(sweep);
        clearTimeout(cutoff);
      }
    },
  };
}

const NEXT = Symbol('next in flight');
const PREV = Symbol('previous in flight');
type Linked = http.ServerResponse & { [NEXT]?: Linked | null; [PREV]?: Linked | null };

/**
 * The responses in flight, as a doubly linked list through the responses themselves; a
 * response leaves it with both links cleared.
 *
 * Why not a Set, written by hand: every request adds an entry and deletes it, so V8 keeps
 * replacing the Set's hash table, and a replaced table keeps its entries and a link to its
 * successor (for iterators that may still walk it). Once one replaced table lives in the old
 * generation (alive at two young-generation collections is enough), that dead chain keeps
 * every later table, and the responses in them with their requests, buffers and closures,
 * alive through each young collection until the next full one, which comes sooner for it:
 * on the validation path a fifth of everything allocated was promoted, and collecting took
 * a seventh of the main thread (`npm run bench:gc`, bench/gc-survival.ts). A list through
 * the responses allocates nothing and leaves nothing behind.
 */
export class InFlight {
  private head: Linked | null = null;
  private count = 0;

  /** How many responses are in the list. */
  get size(): number {
    return this.count;
  }

  add(res: Linked): void {
    res[PREV] = null;
    res[NEXT] = this.head;
    if (this.head) this.head[PREV] = res;
    this.head = res;
    this.count++;
  }

  delete(res: Linked): void {
    if (res[NEXT] === undefined) return; // never added, or already gone
    const prev = res[PREV] ?? null;
    const next = res[NEXT] ?? null;
    if (prev) prev[NEXT] = next;
    else if (this.head === res) this.head = next;
    if (next) next[PREV] = prev;
    res[NEXT] = undefined;
    res[PREV] = undefined;
    this.count--;
  }

  forEach(visit: (res: http.ServerResponse) => void): void {
    for (let res = this.head; res; res = res[NEXT] ?? null) visit(res);
  }
}
