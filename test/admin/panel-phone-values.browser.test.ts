import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { browserMissing, clickAndLoad, newContext, releaseBrowser, sharedBrowser } from '../helpers/browser.ts';
import { makeUser } from '../helpers/factories.ts';

/**
 * Admin pages on a 375 px phone with ordinary values: a client name without spaces, an
 * email-style link name. The page must not scroll sideways, and a pending link's buttons must be
 * on screen. Found by a review helper.
 */
describe.skipIf(browserMissing)('admin pages on a 375 px phone with long names (Chromium)', () => {
  let app: TestApp;
  let browser: Browser;
  let page: Page;
  beforeAll(async () => {
    app = await startTestApp();
    browser = await sharedBrowser();
    const admin = await makeUser(app, { role: 'admin' });
    page = await (await newContext(browser, { width: 375, height: 812, mobile: true })).newPage();
    await page.goto(`${await app.listen()}/admin`);
    await page.getByLabel('Username').fill(admin.username);
    await page.getByLabel('Password').fill(admin.password);
    await clickAndLoad(page, page.getByRole('button', { name: 'Sign in', exact: true }));
  });
  afterAll(async () => {
    await releaseBrowser(browser);
    await app?.close();
  });

  it('the regenerate-secret page does not scroll sideways for an ordinary client name', async () => {
    const wide: string[] = [];
    for (const name of ['SAP_SuccessFactors_Production', 'intranet.examplecorp.com']) {
      const { client } = await app.services.clients.createClient({ name, callbackUrl: 'https://crm.example/sso/callback', allowedIps: [] }, { via: 'cli' });
      for (const path of [`/admin/clients/${client.client_id}`, `/admin/clients/${client.client_id}/regenerate`]) {
        await page.goto(`${await app.listen()}${path}`);
        const width = await page.evaluate(() => document.documentElement.scrollWidth);
        if (width > 375) wide.push(`${name} ${path}: ${width}px`);
      }
    }
    expect(wide).toStrictEqual([]);
  });

  it('a pending link named like an email address can be approved without scrolling sideways', async () => {
    const member = await makeUser(app);
    const { client } = await app.services.clients.createClient({ name: 'Shop', callbackUrl: 'https://shop.example/sso/callback', allowedIps: [] }, { via: 'cli' });
    await app.services.links.request({ id: member.id, username: member.username }, client.client_id, 'firstname.lastname@example.com', { ipAddress: '127.0.0.1', userAgent: 'test' } as never);
    await page.goto(`${await app.listen()}/admin/users/${member.id}`);
    const approve = page.getByRole('button', { name: /^Approve / });
    const box = (await approve.boundingBox())!;
    const right = Math.round(box.x + box.width);
    expect({ pageWidth: await page.evaluate(() => document.documentElement.scrollWidth), approveOnScreen: right <= 375 }, `Approve ends at x=${right}`)
      .toStrictEqual({ pageWidth: 375, approveOnScreen: true });
  });
});
