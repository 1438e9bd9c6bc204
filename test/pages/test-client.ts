import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestApp } from '../helpers/app.ts';
import { makeClient } from '../helpers/factories.ts';

/** One callback the test client received, and what /api/sso/validate answered for it. */
export interface CallbackVisit {
  token: string | null;
  state: string | null;
  query: Record<string, string>;
  status: number;
  answer: any;
}

/**
 * A tiny client system on 127.0.0.1, registered with the service: its callback validates the
 * token with POST /api/sso/validate (its own credentials, server-side, as a real client
 * does) and shows the user the service names. `visits` records every callback.
 */
export async function startTestClient(app: TestApp, options: { name?: string } = {}) {
  const base = await app.listen();
  const visits: CallbackVisit[] = [];
  // Filled in once the client is registered (its callback URL needs this server's port first).
  const credentials: { client_id?: string; client_secret?: string } = {};
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname !== '/callback') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    const token = url.searchParams.get('token');
    const answer = await fetch(`${base}/api/sso/validate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: token ?? '', ...credentials }),
    });
    const body = await answer.json();
    visits.push({ token, state: url.searchParams.get('state'), query: Object.fromEntries(url.searchParams), status: answer.status, answer: body });
    const escape = (s: string) => s.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(
      `<!doctype html><html lang="en"><head><title>Test client</title></head><body><main>` +
        (body.valid ? `<h1 id="who">Hello ${escape(body.user.username)}</h1>` : `<h1 id="refused">Refused: ${escape(String(body.error))}</h1>`) +
        `<pre id="answer">${escape(JSON.stringify(body))}</pre></main></body></html>`,
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const client = await makeClient(app, { callbackUrl: `${origin}/callback?app=test`, name: options.name });
  Object.assign(credentials, { client_id: client.client_id, client_secret: client.client_secret });
  return {
    ...client,
    origin,
    visits,
    /** The service's sign-in URL for this client. */
    loginUrl: (query: Record<string, string> = {}) =>
      `${base}/sso/login?${new URLSearchParams({ client_id: client.client_id, ...query })}`,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}

export type TestClient = Awaited<ReturnType<typeof startTestClient>>;
