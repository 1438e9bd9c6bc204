import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { browserMissing, newContext, releaseBrowser, sharedBrowser } from '../helpers/browser.ts';
import { makeUser } from '../helpers/factories.ts';
import { signInPage } from './browser-support.ts';

/**
 * The app behind a gate that holds POSTs to one path until `release` (the answer is "on its
 * way"), counting them: what a slow answer looks like to someone who clicks again. The app is
 * the real one; only the wait is added in front of it.
 */
async function gatedApp(app: TestApp) {
  const held = { path: '', sent: 0, release: () => {} };
  let gate: Promise<void> = Promise.resolve();
  const server = http.createServer(async (req, res) => {
    if (req.method === 'POST' && new URL(req.url ?? '/', 'http://x').pathname === held.path) {
      held.sent++;
      await gate;
    }
    app.app(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    /** From now on, holds the POSTs to `path` until the returned release() is called. */
    hold(path: string) {
      held.path = path;
      held.sent = 0;
      gate = new Promise<void>((resolve) => { held.release = resolve; });
      return held;
    },
    /** Lets every held POST through, and holds no more. */
    release() {
      held.path = '';
      held.release();
    },
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}

/** Script errors of the page (a refused script, an exception), collected as they happen. */
function scriptErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|Refused/.test(m.text())) errors.push(m.text());
  });
  return errors;
}

// a browser on a busy two-core machine: generous bounds (nothing here measures speed)
describe.skipIf(browserMissing)('forms are sent once, in Chromium', () => {
  let app: TestApp;
  let gated: Awaited<ReturnType<typeof gatedApp>>;
  let url: string;
  let browser: Browser;
  beforeAll(async () => {
    app = await startTestApp();
    gated = await gatedApp(app);
    url = gated.url;
    browser = await sharedBrowser();
  });
  afterEach(() => gated.release());
  afterAll(async () => {
    await releaseBrowser(browser);
    await gated?.close();
    await app?.close();
  });

  // Playwright cannot evaluate in a page whose navigation is pending (the answer is held), but
  // real mouse and keyboard input still reach it, and the page reports what it sees on the console.
  it('disables the submit button of a sent form: a double click, another click and Enter while the answer is on its way send it once', async () => {
    const user = await makeUser(app);
    const page = await (await newContext(browser)).newPage();
    const errors = scriptErrors(page);
    const said: string[] = [];
    page.on('console', (m) => said.push(m.text()));
    await page.goto(`${url}/login`);
    await page.getByLabel('Username').fill(user.username);
    await page.getByLabel('Password').fill(user.password);
    const box = (await page.getByRole('button', { name: 'Sign in', exact: true }).boundingBox())!;
    const field = (await page.getByLabel('Password').boundingBox())!;
    // a moment after the form is sent, the page says whether its button is disabled
    await page.evaluate(() => document.addEventListener('submit', () => setTimeout(() => {
      console.log(`sign-in button disabled: ${document.querySelector<HTMLButtonElement>('form button[type="submit"]')!.disabled}`);
    }, 100), { once: true }));
    const held = gated.hold('/login');
    await page.mouse.dblclick(box.x + box.width / 2, box.y + box.height / 2);
    await expect.poll(() => said.find((t) => t.startsWith('sign-in button disabled')), { timeout: 10_000 }).toBe('sign-in button disabled: true');
    await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
    await page.mouse.click(field.x + field.width / 2, field.y + field.height / 2);
    await page.keyboard.press('Enter');
    await expect.poll(() => held.sent, { timeout: 10_000 }).toBeGreaterThanOrEqual(1);
    await new Promise((resolve) => setTimeout(resolve, 500)); // time for a second POST to arrive, had one been sent
    const arrived = page.waitForURL('**/dashboard', { timeout: 20_000 });
    held.release();
    await arrived;
    expect(held.sent, 'sent once').toBe(1);
    expect(errors).toStrictEqual([]);
  });

  it('does so in the admin panel too; the button works again when the page comes back from the back/forward cache', async () => {
    const admin = await makeUser(app, { role: 'admin' });
    const page = await (await newContext(browser)).newPage();
    const errors = scriptErrors(page);
    await signInPage(page, url, admin.username, admin.password, '/login?next=/admin/clients');
    await page.waitForURL('**/admin/clients');
    await page.locator('#new-name').fill('Sent Once');
    await page.locator('#new-callback').fill('https://once.example/cb');
    const held = gated.hold('/admin/clients');
    const button = page.getByRole('button', { name: 'Register client system' });
    // sent, then left (Stop) before the answer came: the page stays, its button disabled
    await page.evaluate(() => new Promise<void>((resolve) => {
      document.querySelector<HTMLButtonElement>('#new-name')!.form!.requestSubmit();
      setTimeout(() => {
        window.stop();
        resolve();
      }, 200);
    }));
    await expect.poll(() => held.sent, { timeout: 10_000 }).toBe(1);
    expect(await button.isDisabled(), 'disabled once sent').toBe(true);

    // back to the page from the back/forward cache (pages here are no-store, which keeps
    // Chromium from caching them, so the event such a return fires is dispatched here)
    await page.evaluate(() => window.dispatchEvent(new PageTransitionEvent('pageshow', { persisted: true })));
    expect(await button.isDisabled(), 'usable again').toBe(false);
    held.release();
    await Promise.all([page.waitForURL('**/admin/clients/sent-once-*', { timeout: 20_000 }), button.click()]);
    expect(await page.locator('#client-secret').count(), 'the page with the new secret').toBe(1);
    expect(errors).toStrictEqual([]);
  });

  it('leaves every form working without JavaScript', async () => {
    const user = await makeUser(app);
    const context = await browser.newContext({ javaScriptEnabled: false, locale: 'en-US' });
    const page = await context.newPage();
    await signInPage(page, url, user.username, user.password);
    expect(new URL(page.url()).pathname).toBe('/dashboard');
    await page.goto(`${url}/account/security`);
    await Promise.all([page.waitForURL('**/account/security#setup'), page.getByRole('button', { name: 'Set up two-step verification' }).click()]);
    expect(await page.locator('[data-field="totp-secret"]').count()).toBe(1);
  });
});
