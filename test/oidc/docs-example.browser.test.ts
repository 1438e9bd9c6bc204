import { type ChildProcess, spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserMissing, newContext, releaseBrowser, sharedBrowser } from '../helpers/browser.ts';
import { makeUser } from '../helpers/factories.ts';
import { fillSignIn, freePort, startIssuer } from './support.ts';

const EXAMPLE = 'docs/examples/express-openid-connect.mjs';

describe.skipIf(browserMissing)('the express-openid-connect example of docs/openid-connect.md', () => {
  let service: Awaited<ReturnType<typeof startIssuer>>;
  let browser: Browser;
  let child: ChildProcess | undefined;
  let appUrl: string;
  beforeAll(async () => {
    service = await startIssuer();
    browser = await sharedBrowser();
    appUrl = `http://localhost:${await freePort()}`;
    const { client, secret } = await service.app.services.clients.createClient(
      { name: 'My app', callbackUrl: `${appUrl}/callback`, postLogoutRedirectUris: [appUrl], allowedIps: ['127.0.0.1', '::1'] }, { via: 'cli', username: 'test' });
    child = spawn(process.execPath, [EXAMPLE], {
      env: { ...process.env, AUTH_URL: service.issuer, APP_URL: appUrl, CLIENT_ID: client.client_id, CLIENT_SECRET: secret, APP_SESSION_SECRET: 'an-application-cookie-key-of-32-characters' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await new Promise<void>((resolve, reject) => {
      child!.stdout!.on('data', (d: Buffer) => { if (d.toString().includes('listening')) resolve(); });
      child!.once('exit', (code) => reject(new Error(`example exited with ${code}`)));
    });
  });
  afterAll(async () => {
    child?.kill();
    await releaseBrowser(browser);
    await service?.close();
  });

  it('is in the document verbatim', async () => {
    const doc = await readFile('docs/openid-connect.md', 'utf8');
    expect(doc).toContain((await readFile(EXAMPLE, 'utf8')).trim());
  });

  it('signs a user in at the service and shows their claims', async () => {
    const user = await makeUser(service.app, { fullName: 'Grace Hopper' });
    const page = await (await newContext(browser)).newPage();
    await page.goto(`${appUrl}/`);
    await fillSignIn(page, user.username, user.password);
    await page.waitForURL(`${appUrl}/`);
    const claims = JSON.parse(await page.locator('body').innerText()) as Record<string, unknown>;
    expect(claims).toMatchObject({ sub: String(user.id), name: 'Grace Hopper', preferred_username: user.username, email: user.email, roles: ['user'] });
    await page.context().close();
  });
});
