import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { browserMissing, clickAndLoad, newContext, releaseBrowser, sharedBrowser } from '../helpers/browser.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';

/**
 * A client system's callback that, having validated the token, sends the browser on to its
 * application on another origin (here 127.0.0.1 -> localhost, as an sso.shop.example callback
 * sending on to shop.example would). The pages whose forms end at a client carry no CSP
 * form-action: Chromium applies it to every redirect after the post, the last hop included.
 */
describe.skipIf(browserMissing)('a client whose callback redirects to its application on another origin', () => {
  let app: TestApp;
  let browser: Browser;
  let server: http.Server;
  let port = 0;
  const seen: string[] = [];
  beforeAll(async () => {
    app = await startTestApp();
    browser = await sharedBrowser();
    server = http.createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      seen.push(`${req.headers.host}${url.pathname}`);
      if (url.pathname === '/callback') {
        res.writeHead(302, { location: `http://localhost:${port}/home` }).end();
      } else {
        res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>Home</title><h1 id="home">Home</h1>');
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await releaseBrowser(browser);
    server?.closeAllConnections();
    await new Promise<void>((r) => server?.close(() => r()));
    await app?.close();
  });

  it('arrives at the application after signing in on the sign-in page', async () => {
    const client = await makeClient(app, { callbackUrl: `http://127.0.0.1:${port}/callback` });
    const user = await makeUser(app);
    const context = await newContext(browser);
    const page = await context.newPage();
    const blocked: string[] = [];
    page.on('console', (m) => { if (/Content Security Policy|form-action/i.test(m.text())) blocked.push(m.text()); });
    await page.goto(`${await app.listen()}/sso/login?client_id=${client.client_id}`);
    await page.getByLabel('Username').fill(user.username);
    await page.getByLabel('Password').fill(user.password);
    await clickAndLoad(page, page.getByRole('button', { name: 'Sign in', exact: true })).catch(() => {});
    await page.waitForURL(`http://localhost:${port}/home`, { timeout: 20_000 }).catch(() => undefined);
    expect(blocked, 'the browser refused the redirect chain').toStrictEqual([]);
    expect(page.url()).toBe(`http://localhost:${port}/home`);
  });

  it('arrives at the application after a one-click sign-in on the dashboard (every time: it is always a form)', async () => {
    const client = await makeClient(app, { callbackUrl: `http://127.0.0.1:${port}/callback`, name: 'Far Shop' });
    const user = await makeUser(app);
    await app.services.links.request(user, client.client_id, 'far.user', { ipAddress: '127.0.0.1', userAgent: null });
    const context = await newContext(browser);
    const page = await context.newPage();
    const blocked: string[] = [];
    page.on('console', (m) => { if (/Content Security Policy|form-action/i.test(m.text())) blocked.push(m.text()); });
    await page.goto(`${await app.listen()}/login`);
    await page.getByLabel('Username').fill(user.username);
    await page.getByLabel('Password').fill(user.password);
    await clickAndLoad(page, page.getByRole('button', { name: 'Sign in', exact: true }));
    await clickAndLoad(page, page.getByRole('button', { name: 'Open Far Shop' })).catch(() => {});
    await page.waitForURL(`http://localhost:${port}/home`, { timeout: 20_000 }).catch(() => undefined);
    expect(blocked, 'the browser refused the redirect chain').toStrictEqual([]);
    expect(page.url()).toBe(`http://localhost:${port}/home`);
  });
});
