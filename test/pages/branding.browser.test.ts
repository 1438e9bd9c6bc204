import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { browserMissing, clickAndLoad, newContext, releaseBrowser, saveScreenshot, sharedBrowser } from '../helpers/browser.ts';
import { makeUser } from '../helpers/factories.ts';
import { expectAccessible, signInPage } from './browser-support.ts';

const svg = (fill: string) => `data:image/svg+xml;base64,${Buffer.from(`<svg xmlns="http://www.w3.org/2000/svg" width="160" height="48"><rect width="160" height="48" rx="8" fill="${fill}"/></svg>`).toString('base64')}`;
const BRAND_LOGO = svg('#0b7285');
const CLIENT_LOGO = svg('#c2255c');

// a browser on a busy two-core machine: generous bounds (nothing here measures speed)
describe.skipIf(browserMissing)('branding in Chromium', () => {
  let app: TestApp;
  let url: string;
  let browser: Browser;
  beforeAll(async () => {
    app = await startTestApp({ BRAND_NAME: 'Northwind Traders', BRAND_LOGO_URL: BRAND_LOGO });
    url = await app.listen();
    browser = await sharedBrowser();
  });
  afterAll(async () => {
    await releaseBrowser(browser);
    await app?.close();
  });

  it('an administrator gives a client system a logo in the panel; its sign-in page shows it, names the client in the tab title, and fetches nothing from other sites', async () => {
    const admin = await makeUser(app, { role: 'admin' });
    const { client } = await app.services.clients.createClient({ name: 'Harbour Logistics', callbackUrl: 'https://logistics.example/sso/cb' }, { via: 'cli' });
    const adminPage = await (await newContext(browser)).newPage();
    await signInPage(adminPage, url, admin.username, admin.password, `/login?next=/admin/clients/${client.client_id}`);
    expect(await adminPage.locator('.brand').innerText()).toBe('Northwind Traders');
    await adminPage.getByLabel('Logo (optional)').fill('https://cdn.example.com/logo.png');
    await clickAndLoad(adminPage, adminPage.getByRole('button', { name: 'Save changes' }));
    expect(await adminPage.locator('#edit-logo').getAttribute('aria-invalid'), 'a third-party address is refused at the field').toBe('true');
    await adminPage.getByLabel('Logo (optional)').fill(CLIENT_LOGO);
    await clickAndLoad(adminPage, adminPage.getByRole('button', { name: 'Save changes' }));
    expect((await app.services.clients.findClient(client.client_id))?.logo_url).toBe(CLIENT_LOGO);

    const page = await (await newContext(browser)).newPage();
    const elsewhere: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(url) && !r.url().startsWith('data:')) elsewhere.push(r.url());
    });
    await page.goto(`${url}/sso/login?client_id=${client.client_id}&state=abc`);
    expect(await page.title()).toBe('Sign in to Harbour Logistics · Northwind Traders');
    const logo = page.getByRole('img', { name: 'Harbour Logistics' });
    expect(await logo.getAttribute('src')).toBe(CLIENT_LOGO);
    expect(await logo.evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth > 0), 'the client logo renders').toBe(true);
    const brandLogo = page.locator('.auth__brand img.logo');
    expect(await brandLogo.getAttribute('src')).toBe(BRAND_LOGO);
    expect(await brandLogo.evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth > 0), 'the organisation logo renders').toBe(true);
    expect(await page.locator('.auth__brand').innerText()).toBe('Northwind Traders');
    expect(await page.locator('.site-footer').innerText()).toMatch(/^Northwind Traders · /);
    await expectAccessible(page, 'branded client sign-in');
    await saveScreenshot(page, 'login-branded-client');
    expect(elsewhere, 'no request leaves this service').toStrictEqual([]);

    const user = await makeUser(app);
    const own = await (await newContext(browser)).newPage();
    await signInPage(own, url, user.username, user.password, '/login');
    expect(await own.title()).toBe('Dashboard · Northwind Traders');
  });
});
