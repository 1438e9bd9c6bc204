import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { browserMissing, clickAndLoad, newContext, releaseBrowser, sharedBrowser } from '../helpers/browser.ts';
import { makeUser } from '../helpers/factories.ts';

/**
 * The panel's tables at 390 px (stacked rows: every value with its column's label, nothing off
 * screen) and at 1280 px (every column of the audit table within its box, Details included).
 */
describe.skipIf(browserMissing)('the panel\'s tables at 390 and 1280 px (Chromium)', () => {
  let app: TestApp;
  let url: string;
  let browser: Browser;
  let admin: Awaited<ReturnType<typeof makeUser>>;
  beforeAll(async () => {
    app = await startTestApp();
    url = await app.listen();
    browser = await sharedBrowser();
    admin = await makeUser(app, { role: 'admin' });
    const member = await makeUser(app, { username: 'bartholomew.featherstonehaugh', fullName: 'Bartholomew Featherstonehaugh' });
    const { client } = await app.services.clients.createClient({ name: 'Customer Relationship Management (Northern Europe)', callbackUrl: 'https://crm.example/cb', allowedIps: [] }, { via: 'cli' });
    await app.services.links.request({ id: member.id, username: member.username }, client.client_id, 'bartholomew.featherstonehaugh@sales.example.com', { ipAddress: '127.0.0.1', userAgent: 'test' } as never);
    // audit rows with long details
    await app.http.post('/api/auth/login', { login: member.username, password: 'wrong-password' });
  });
  afterAll(async () => {
    await releaseBrowser(browser);
    await app?.close();
  });

  async function signedInPage(size: { width: number; height: number; mobile?: boolean }): Promise<Page> {
    const page = await (await newContext(browser, size)).newPage();
    await page.goto(`${url}/admin`);
    await page.getByLabel('Username').fill(admin.username);
    await page.getByLabel('Password').fill(admin.password);
    await clickAndLoad(page, page.getByRole('button', { name: 'Sign in', exact: true }));
    return page;
  }

  /** Cells of stacked tables on the page whose label (their ::before) is missing or hidden. */
  const unlabelled = (page: Page, selector: string) => page.$$eval(selector, (cells) => cells.flatMap((td) => {
    if (td.textContent?.trim() === '' || getComputedStyle(td).display === 'none') return [];
    const before = getComputedStyle(td, '::before');
    const label = before.content.replace(/^"|"$/g, '');
    return label === '' || label === 'none' || before.display === 'none' ? [`${td.closest('table')?.className} ${(td as HTMLTableCellElement).cellIndex}: ${td.textContent?.trim().slice(0, 30)}`] : [];
  }));

  /** Elements matched by `selector` reaching past the right edge of the viewport. */
  const offScreen = (page: Page, selector: string) => page.$$eval(selector, (els) => els.flatMap((el) => {
    const r = el.getBoundingClientRect();
    return r.right > window.innerWidth + 0.5 ? [`${el.tagName} ${el.textContent?.trim().slice(0, 30)} ends at ${Math.round(r.right)}`] : [];
  }));

  it('at 390 px every stacked value of the audit, overview and users tables shows its label, and pending links fit', async () => {
    const page = await signedInPage({ width: 390, height: 844, mobile: true });
    const problems: string[] = [];
    for (const path of ['/admin', '/admin/audit', '/admin/users']) {
      await page.goto(`${url}${path}`);
      problems.push(...(await unlabelled(page, 'main table tbody td')).map((p) => `${path} ${p}`));
      problems.push(...(await offScreen(page, 'main table tbody td, main table tbody button')).map((p) => `${path} ${p}`));
    }
    await page.goto(`${url}/admin/users`);
    // the pending link's names are shown whole, and its buttons are on screen
    const row = page.locator('[data-pending-link]').first();
    for (const text of ['bartholomew.featherstonehaugh', 'Customer Relationship Management (Northern Europe)', 'bartholomew.featherstonehaugh@sales.example.com']) {
      const cell = row.locator('td', { hasText: text }).first();
      const clipped = await cell.evaluate((td) => td.scrollWidth > td.clientWidth + 1);
      if (clipped) problems.push(`pending link: ${text} is cut`);
    }
    for (const name of [/^Approve /, /^Revoke /]) {
      const box = (await row.getByRole('button', { name }).boundingBox())!;
      if (box.x + box.width > 390) problems.push(`${name} ends at ${Math.round(box.x + box.width)}`);
    }
    expect(problems).toStrictEqual([]);
  });

  it('at 1280 px the audit table shows every column, Details included, within its box', async () => {
    const page = await signedInPage({ width: 1280, height: 800 });
    for (const path of ['/admin/audit', '/admin']) {
      await page.goto(`${url}${path}`);
      const cut = await page.$$eval('table.table--audit', (tables) => tables.flatMap((t) => {
        const box = (t.closest('.table-wrap') ?? t.parentElement!).getBoundingClientRect();
        const details = t.querySelector('th:last-child')!.getBoundingClientRect();
        return details.right > Math.min(box.right, window.innerWidth) + 0.5 ? [`Details ends at ${Math.round(details.right)}, its box at ${Math.round(box.right)}`] : [];
      }));
      expect(cut, path).toStrictEqual([]);
    }
  });
});
