import type http from 'node:http';

/**
 * Lets an HTTP server stop without losing a request: once `close` is called the listening
 * socket is closed (new connections are refused, so a load balancer moves on), idle
 * keep-alive connections are closed, every response still to be written carries
 * `Connection: close` so clients do not reuse a connection that is about to go away, and
 * `close` resolves once the last in-flight request has been answered, or after `timeoutMs`,
 * when whatever is left is cut off.
 */
export function gracefulCloser(server: http.Server): { close(timeoutMs: number): Promise<void> } {
  const inFlight = new Set<http.ServerResponse>();
  let closing = false;
  const markLast = (res: http.ServerResponse) => {
    if (!res.headersSent) res.setHeader('Connection', 'close');
  };
  // Prepended so it runs before the application answers.
  server.prependListener('request', (_req: http.IncomingMessage, res: http.ServerResponse) => {
    if (closing) markLast(res);
    inFlight.add(res);
    const done = () => inFlight.delete(res);
    res.once('finish', done);
    res.once('close', done);
  });

  return {
    async close(timeoutMs) {
      closing = true;
      for (const res of inFlight) markLast(res);
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
