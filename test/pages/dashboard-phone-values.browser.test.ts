import { describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { type TestApp } from '../helpers/app.ts';
import { browserMissing, clickAndLoad, newContext } from '../helpers/browser.ts';
import { makeUser } from '../helpers/factories.ts';
import { browserSuite, overflow, signInPage } from '../pages/browser-support.ts';

/** The phone width of the review brief (an iPhone SE / mini class screen). */
const PHONE_375 = { width: 375, height: 667, mobile: true };

/**
 * The dashboard at 375 px with ordinary, realistic values: a 42-character work email address
 * (the page prints it after "Signed in as"), and a link requested under an email-style username
 * (many client systems use the email address as the login name), which the flash message
 * repeats. The page must not be wider than the viewport (the same criterion as
 * test/pages/phone.browser.test.ts). Found by a review helper.
 */
describe.skipIf(browserMissing)('the dashboard fits a 375 px phone with realistic values (Chromium)', () => {
  let app: TestApp;
  let url: string;
  let browser: Browser;
  browserSuite((suite) => ({ app, url, browser } = suite));

  it('a long work email address does not widen the dashboard', async () => {
    const user = await makeUser(app, { username: 'maximilian.oberhauser', fullName: 'Maximilian Oberhauser', email: 'maximilian.oberhauser@personalabteilung.de' });
    const page = await (await newContext(browser, PHONE_375)).newPage();
    await page.goto(`${url}/login`);
    await signInPage(page, url, user.username, user.password);
    await page.waitForURL('**/dashboard');
    const o = await overflow(page);
    expect(o.scrollWidth, `dashboard is ${o.scrollWidth}px wide at ${o.innerWidth}px`).toBeLessThanOrEqual(375);
  });

  it('a link requested under an email-style username does not widen the dashboard', async () => {
    const user = await makeUser(app, { username: 'mo', fullName: 'Max O', email: 'mo@example.com' });
    const { client } = await app.services.clients.createClient(
      { name: 'Customer Service Portal', callbackUrl: 'https://portal.example.com/sso/callback', allowedIps: ['127.0.0.1'] }, { via: 'cli' });
    const page = await (await newContext(browser, PHONE_375)).newPage();
    await page.goto(`${url}/login`);
    await signInPage(page, url, user.username, user.password);
    await page.waitForURL('**/dashboard');
    await page.locator(`#link-${client.client_id}`).fill('maximilian.oberhauser@personalabteilung.de');
    await clickAndLoad(page, page.locator(`[data-client-id="${client.client_id}"]`).getByRole('button', { name: 'Link' }));
    await page.waitForURL('**/dashboard');
    expect(await page.locator(`[data-client-id="${client.client_id}"]`).getAttribute('data-link-status')).toBe('pending');
    const o = await overflow(page);
    expect(o.scrollWidth, `dashboard is ${o.scrollWidth}px wide at ${o.innerWidth}px: ${o.culprits.join(', ')}`).toBeLessThanOrEqual(375);
  });
});
