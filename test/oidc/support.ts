import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page } from 'playwright-core';
import { createServer } from '../../src/app.ts';
import type { Db } from '../../src/db/db.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { clickAndLoad } from '../helpers/browser.ts';

/** A free loopback port (the issuer must be known before the instance is built). */
export async function freePort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** The service listening on a port of its own, its issuer (PUBLIC_URL) that very address. */
export async function startIssuer(env: Record<string, string> = {}, options: { db?: Db; databaseUrl?: string } = {}): Promise<{ app: TestApp; issuer: string; close(): Promise<void> }> {
  const port = await freePort();
  const issuer = `http://127.0.0.1:${port}`;
  const app = await startTestApp({ PUBLIC_URL: issuer, ...env }, options);
  const server = createServer(app.app);
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    app,
    issuer,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      if (options.db) await app.stop();
      else await app.close();
    },
  };
}

/** A relying party's redirect target: answers 200 to anything, and remembers the URLs it was sent to. */
export async function startReceiver(): Promise<{ origin: string; hits: URL[]; posts: Array<{ path: string; body: string }>; close(): Promise<void> }> {
  const hits: URL[] = [];
  const posts: Array<{ path: string; body: string }> = [];
  const server = http.createServer((req, res) => {
    hits.push(new URL(req.url ?? '/', 'http://127.0.0.1'));
    let body = '';
    req.on('data', (chunk: Buffer) => { body += chunk.toString(); });
    req.on('end', () => {
      if (req.method === 'POST') posts.push({ path: req.url ?? '/', body });
      res.setHeader('Content-Type', 'text/html');
      res.end('<!doctype html><title>client</title><h1 id="client">client system</h1>');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    hits,
    posts,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Fills the service's sign-in form (first step) and submits it. */
export async function fillSignIn(page: Page, login: string, password: string): Promise<void> {
  await page.getByLabel('Username').fill(login);
  await page.getByLabel('Password').fill(password);
  await clickAndLoad(page, page.getByRole('button', { name: 'Sign in', exact: true }));
}
