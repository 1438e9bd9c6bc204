import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Locator, Page } from 'playwright-core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { browserMissing, clickAndLoad, newContext, releaseBrowser, saveScreenshot, sharedBrowser } from '../helpers/browser.ts';
import { makeUser } from '../helpers/factories.ts';
import { alertText, expectAccessible, signInPage } from './browser-support.ts';

/** The message a screen reader hears for a field: aria-invalid set, the error among its aria-describedby. */
async function problemOf(field: Locator): Promise<{ invalid: string | null; described: string }> {
  return field.evaluate((el) => ({
    invalid: el.getAttribute('aria-invalid'),
    described: (el.getAttribute('aria-describedby') ?? '').split(/\s+/).filter(Boolean)
      .map((id) => document.getElementById(id)?.textContent?.trim() ?? '').join(' | '),
  }));
}

/** Submits the form of `button` with the browser's own checks off, so the server's answer is what is tested. */
async function submit(page: Page, button: Locator): Promise<void> {
  await button.evaluate((b: HTMLButtonElement) => { if (b.form) b.form.noValidate = true; });
  await clickAndLoad(page, button);
}

// a browser on a busy two-core machine: generous bounds (nothing here measures speed)
describe.skipIf(browserMissing)('field-level errors in the admin and dashboard forms, in Chromium', () => {
  let app: TestApp;
  let url: string;
  let browser: Browser;
  let page: Page;
  beforeAll(async () => {
    app = await startTestApp();
    url = await app.listen();
    browser = await sharedBrowser();
    const admin = await makeUser(app, { role: 'admin' });
    page = await (await newContext(browser)).newPage();
    await signInPage(page, url, admin.username, admin.password, '/login?next=/admin');
  });
  afterAll(async () => {
    await releaseBrowser(browser);
    await app?.close();
  });

  it('client registration and edit: the field at fault is marked with its message under it, the banner stays as summary', async () => {
    await page.goto(`${url}/admin/clients`);
    await page.locator('#new-name').fill('Shop');
    await page.locator('#new-callback').fill('ftp://shop.example/cb');
    await submit(page, page.getByRole('button', { name: 'Register client system' }));
    expect(await alertText(page)).toMatch(/callback_url must be an absolute http\(s\) URL/);
    expect(await problemOf(page.locator('#new-callback'))).toStrictEqual({
      invalid: 'true', described: 'Must be an absolute http(s) URL without credentials or fragment. | Browsers are sent here with the token after signing in.',
    });
    expect((await problemOf(page.locator('#new-name'))).invalid, 'the other fields are not marked').toBe(null);
    expect(await page.locator('#new-name').inputValue(), 'what was typed is kept').toBe('Shop');
    await expectAccessible(page, 'client refused');
    await saveScreenshot(page, 'form-client-refused');

    await page.locator('#new-callback').fill('https://shop.example/cb');
    await page.locator('#new-ips').fill('10.0.0.0/8\n300.1.1.1');
    await submit(page, page.getByRole('button', { name: 'Register client system' }));
    expect((await problemOf(page.locator('#new-ips'))).described).toMatch(/^Not an IP address or CIDR range: 300\.1\.1\.1\./);

    await page.locator('#new-name').fill('   ');
    await page.locator('#new-ips').fill('');
    await submit(page, page.getByRole('button', { name: 'Register client system' }));
    expect((await problemOf(page.locator('#new-name'))).described).toMatch(/^Enter a name\./);

    const { client } = await app.services.clients.createClient({ name: 'Wiki', callbackUrl: 'https://wiki.example/cb' }, { via: 'cli' });
    await page.goto(`${url}/admin/clients/${client.client_id}`);
    await page.locator('#edit-ips').fill('0.0.0.0/0');
    await submit(page, page.getByRole('button', { name: 'Save changes' }));
    expect((await problemOf(page.locator('#edit-ips'))).described).toMatch(/0\.0\.0\.0\/0 admits every address; confirm to save it/);
  });

  it('user creation and profile edit mark the username, email and password fields', async () => {
    const taken = await makeUser(app);
    await page.goto(`${url}/admin/users/new`);
    await page.getByLabel('Username').fill(taken.username);
    await page.getByLabel('Email').fill('new@example.com');
    await page.getByLabel('Initial password').fill('a long enough passphrase');
    await submit(page, page.getByRole('button', { name: 'Create user' }));
    expect(await alertText(page)).toMatch(/is taken/);
    expect((await problemOf(page.getByLabel('Username'))).invalid).toBe('true');
    expect((await problemOf(page.getByLabel('Username'))).described).toMatch(/is taken/);
    await expectAccessible(page, 'user refused');
    await saveScreenshot(page, 'form-user-refused');

    await page.getByLabel('Username').fill('fresh.name');
    await page.getByLabel('Email').fill('not-an-address');
    await page.getByLabel('Initial password').fill('a long enough passphrase');
    await submit(page, page.getByRole('button', { name: 'Create user' }));
    expect((await problemOf(page.getByLabel('Email'))).described).toMatch(/^Email is not a valid address\.|^Is not a valid address\./);

    await page.getByLabel('Email').fill('fresh@example.com');
    await page.getByLabel('Initial password').fill('abc');
    await submit(page, page.getByRole('button', { name: 'Create user' }));
    expect((await problemOf(page.getByLabel('Initial password'))).invalid, 'a refused password marks its field').toBe('true');

    await page.goto(`${url}/admin/users/${taken.id}`);
    await page.getByLabel('Email').fill('still not an address');
    await submit(page, page.getByRole('button', { name: 'Save profile' }));
    expect(await page.getByLabel('Email').inputValue(), 'the typed value is kept').toBe('still not an address');
    expect((await problemOf(page.getByLabel('Email'))).invalid).toBe('true');
    expect(await alertText(page)).toMatch(/email is not a valid address/);
  });

  it('webhook registration and deletion mark the URL, the events and the confirmation box', async () => {
    await page.goto(`${url}/admin/webhooks`);
    await page.getByLabel('Receiver URL').fill('http://127.0.0.1:9/hook');
    await page.getByLabel('Signing secret').fill('sixteen-chars-secret!');
    await submit(page, page.getByRole('button', { name: 'Register webhook' }));
    expect(await alertText(page)).toBe('Tick at least one event.');
    const events = page.getByRole('group', { name: /Events/ });
    expect((await problemOf(events)).described).toBe('Tick at least one event.');
    expect(await page.getByLabel('Receiver URL').inputValue()).toBe('http://127.0.0.1:9/hook');
    await expectAccessible(page, 'webhook refused');
    await saveScreenshot(page, 'form-webhook-refused');

    const hook = await app.services.webhooks.register({ url: 'http://127.0.0.1:9/hook', secret: 'sixteen-chars-secret!', events: ['user.login'] }, { via: 'cli' });
    await page.goto(`${url}/admin/webhooks/${hook.id}`);
    await submit(page, page.getByRole('button', { name: 'Delete' }));
    expect((await problemOf(page.locator('#confirm-delete'))).described).toMatch(/^Tick the box to confirm\./);
  });

  it('the audit filter marks the field it cannot use', async () => {
    await page.goto(`${url}/admin/audit?from=1900-01-01T00:00&action=user.login`);
    const from = await problemOf(page.getByLabel('From (UTC)'));
    expect(from).toStrictEqual({ invalid: 'true', described: 'Must be a time in the years 1970 to 9999 (UTC).' });
    expect((await problemOf(page.getByLabel('Action'))).invalid).toBe(null);
    expect(await alertText(page)).toMatch(/^from: must be a time/);
    await expectAccessible(page, 'audit refused');
  });

  it('the dashboard link form marks the username field of the system it was for', async () => {
    const user = await makeUser(app);
    const { client } = await app.services.clients.createClient({ name: 'CRM', callbackUrl: 'https://crm.example/cb' }, { via: 'cli' });
    const { client: other } = await app.services.clients.createClient({ name: 'ERP', callbackUrl: 'https://erp.example/cb' }, { via: 'cli' });
    const mine = await (await newContext(browser)).newPage();
    await signInPage(mine, url, user.username, user.password);
    await mine.locator(`#link-${client.client_id}`).fill('   ');
    await submit(mine, mine.locator(`[data-client-id="${client.client_id}"]`).getByRole('button', { name: 'Link' }));
    expect(await alertText(mine)).toBe('Enter your username at that system');
    expect(await problemOf(mine.locator(`#link-${client.client_id}`))).toStrictEqual({ invalid: 'true', described: 'Enter your username at that system.' });
    expect((await problemOf(mine.locator(`#link-${other.client_id}`))).invalid, 'only that system').toBe(null);
    await expectAccessible(mine, 'dashboard link refused');
    await mine.reload();
    expect((await problemOf(mine.locator(`#link-${client.client_id}`))).invalid, 'shown once').toBe(null);
  });
});
