import net from 'node:net';

/**
 * A TCP proxy in front of a server (PostgreSQL, Redis) that a test can cut and restore, to
 * play an outage: `cut()` stops listening and drops every connection (the server "dies"),
 * `block()` accepts connections but forwards nothing (a server that hangs), `freeze()` keeps
 * every connection open and new ones accepted but forwards nothing in either direction (a
 * server or network gone silent under open connections), `restore()` serves again on the
 * same port.
 */
export interface TcpProxy {
  port: number;
  /** `url` with its host and port replaced by the proxy's. */
  urlFor(url: string): string;
  cut(): Promise<void>;
  block(): void;
  freeze(): void;
  restore(): Promise<void>;
  close(): Promise<void>;
}

/** Starts a proxy on a free loopback port forwarding to `host:port`. */
export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  let blocked = false;
  let frozen = false;
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
    s.on('error', () => s.destroy());
  };
  const server = net.createServer((inbound) => {
    track(inbound);
    if (blocked) return; // held open, nothing forwarded
    const outbound = net.connect(target.port, target.host);
    track(outbound);
    // not pipe(): while frozen, what either side sends is swallowed, as by a dead network
    inbound.on('data', (chunk) => void (frozen || outbound.write(chunk)));
    outbound.on('data', (chunk) => void (frozen || inbound.write(chunk)));
    inbound.once('close', () => outbound.destroy());
    outbound.once('close', () => inbound.destroy());
  });
  const listen = (port: number) => new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const dropAll = () => {
    for (const s of sockets) s.destroy();
    sockets.clear();
  };
  await listen(0);
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    urlFor(url) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    async cut() {
      blocked = false;
      frozen = false;
      const closed = server.listening ? new Promise<void>((resolve) => server.close(() => resolve())) : Promise.resolve();
      dropAll();
      await closed;
    },
    block() {
      blocked = true;
      dropAll();
    },
    freeze() {
      frozen = true;
      blocked = true;
    },
    async restore() {
      blocked = false;
      frozen = false;
      if (!server.listening) await listen(port);
    },
    async close() {
      dropAll();
      if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
