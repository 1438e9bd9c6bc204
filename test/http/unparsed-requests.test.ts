import net, { type AddressInfo } from 'node:net';
import { createServer } from '../../src/app.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';

/** Writes `raw` to the served app and reads until the server closes the connection. */
function exchange(base: string, raw: string): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [head, ...rest] = text.split('\r\n\r\n');
      const [statusLine, ...lines] = head.split('\r\n');
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n') });
    });
    socket.write(raw);
  });
}

/**
 * Requests that Node's HTTP parser refuses never reach Express; they are still answered as
 * every error of the service is (docs/contract.md, "Errors"): JSON `{error, message}`.
 */
describe('requests Node cannot parse', () => {
  let app: TestApp;
  let base: string;
  beforeAll(async () => {
    app = await startTestApp();
    base = await app.listen();
  });
  afterAll(() => app?.close());

  const cases: Array<[string, string, number, string]> = [
    ['headers over the size limit', `GET /healthz HTTP/1.1\r\nHost: a\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431, 'headers_too_large'],
    ['a Content-Length that is no number', 'POST /api/sso/validate HTTP/1.1\r\nHost: a\r\nContent-Length: abc\r\n\r\n', 400, 'bad_request'],
    ['a request line that is no HTTP', 'HELLO THERE\r\n\r\n', 400, 'bad_request'],
    ['an Expect other than 100-continue', 'POST /api/sso/validate HTTP/1.1\r\nHost: a\r\nExpect: teapot\r\nContent-Length: 0\r\n\r\n', 417, 'expectation_failed'],
  ];
  for (const [what, raw, status, error] of cases) {
    it(`${what}: ${status} ${error} in JSON`, async () => {
      const r = await exchange(base, raw);
      expect(r.status, r.body).toBe(status);
      expect(r.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(r.headers['x-content-type-options']).toBe('nosniff');
      expect(JSON.parse(r.body)).toStrictEqual({ error, message: expect.any(String) });
    });
  }

  it('closes the connection after the answer, though the peer keeps its side open', async () => {
    // the service's own server (src/app.ts), to count the connections it holds
    const server = createServer(app.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    try {
      const { port } = server.address() as AddressInfo;
      const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
      socket.on('data', () => {});
      socket.on('error', () => {});
      const answered = new Promise((resolve) => socket.once('end', resolve));
      socket.write('HELLO THERE\r\n\r\n');
      await answered;
      const open = async () => new Promise<number>((resolve) => server.getConnections((_err, n) => resolve(n)));
      const until = Date.now() + 3000;
      while ((await open()) > 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(await open(), 'a half-open socket would stay open for ever').toBe(0);
      socket.destroy();
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('the service goes on answering afterwards', async () => {
    await exchange(base, 'HELLO THERE\r\n\r\n');
    const r = await exchange(base, 'GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n');
    expect(r.status).toBe(200);
  });
});
