import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { browserMissing, newContext, releaseBrowser, saveScreenshot, sharedBrowser } from '../helpers/browser.ts';
import { axeViolations, expectNoOverflow, PHONE } from './browser-support.ts';

/**
 * The API reference (/docs), drawn by Redoc from /api/openapi.json in Chromium: a sidebar by
 * tag, search, the examples; nothing refused by its CSP, nothing fetched from another host, no
 * axe violation (WCAG 2.1 A/AA), no wider than a phone.
 */
describe.skipIf(browserMissing)('the API reference page, in Chromium', () => {
  let app: TestApp;
  let url: string;
  let browser: Browser;
  beforeAll(async () => {
    app = await startTestApp();
    url = await app.listen();
    browser = await sharedBrowser();
  });
  afterAll(async () => {
    await releaseBrowser(browser);
    await app?.close();
  });

  /** Opens /docs and waits for Redoc's drawing; `problems` collects console errors and requests to other hosts. */
  async function openReference(size: { width: number; height: number; mobile?: boolean }, problems: string[]): Promise<Page> {
    const page = await (await newContext(browser, size)).newPage();
    page.on('console', (m) => { if (m.type() === 'error' || /Content Security Policy|Refused/.test(m.text())) problems.push(`console: ${m.text()}`); });
    page.on('pageerror', (e) => problems.push(`script error: ${e.message}`));
    page.on('request', (r) => {
      const target = new URL(r.url());
      if (!['blob:', 'data:'].includes(target.protocol) && target.origin !== new URL(url).origin) problems.push(`request to another host: ${r.url()}`);
    });
    await page.goto(`${url}/docs`);
    await page.locator('.menu-content').waitFor({ state: 'attached', timeout: 60_000 });
    await page.locator('[data-section-id^="tag/"]').first().waitFor({ state: 'attached', timeout: 60_000 });
    return page;
  }

  it('draws a sidebar by tag with every operation, and finds an operation by search', async () => {
    const problems: string[] = [];
    const page = await openReference({ width: 1280, height: 800 }, problems);
    const document = (await app.http.get('/api/openapi.json')).body as { tags: Array<{ name: string }>; paths: Record<string, Record<string, unknown>> };
    const sidebar = page.locator('.menu-content');
    for (const tag of document.tags) await expect(sidebar.getByText(tag.name, { exact: true }).first().count()).resolves.toBeGreaterThan(0);
    const operations = Object.values(document.paths).reduce((n, ops) => n + Object.keys(ops).length, 0);
    expect(await page.locator('[data-section-id^="tag/"][data-section-id*="/operation/"]').count()).toBe(operations);
    await page.getByPlaceholder('Search...').fill('validate');
    const results = page.locator('[data-role="search:results"] li[role="menuitem"]');
    await results.first().waitFor({ timeout: 30_000 });
    expect(await results.first().getAttribute('aria-label')).toMatch(/[Vv]alidat/);
    // an example from the document: the request sample of the token issue
    expect(await page.locator('body').innerText()).toContain('client_secret');
    await saveScreenshot(page, 'desktop-docs-redoc', { fullPage: false });
    expect(problems).toStrictEqual([]);
  }, 120_000);

  it('has its own CSP, nothing else may run or be fetched', async () => {
    const r = await app.http.get('/docs');
    const csp = String(r.headers['content-security-policy']);
    expect(csp).toMatch(/script-src 'self'(;|$)/);
    expect(csp).not.toMatch(/unsafe-eval|https?:|\*/);
  });

  // Redoc draws every operation at once (about 28,000 elements), and axe's colour-contrast
  // rule takes most of a minute over them on a quiet machine. The colours do not change with
  // the width (one theme, no media query sets a colour), so contrast is checked once, at the
  // desktop width where the sidebar is shown too; the phone gets every other rule, and the
  // layout checks that do change with the width.
  const sizes = [
    { name: 'a 1280 px desktop', size: { width: 1280, height: 800 }, skip: [] },
    { name: 'a 390 px phone', size: PHONE, skip: ['color-contrast'] },
  ];
  for (const { name, size, skip } of sizes) {
    it(`passes axe and fits ${name}, with nothing refused by the CSP or fetched from another host`, async () => {
      const problems: string[] = [];
      const page = await openReference(size, problems);
      for (const v of await axeViolations(page, skip)) problems.push(`axe at ${size.width}px: ${v}`);
      await expectNoOverflow(page, `/docs at ${size.width}px`);
      expect(problems).toStrictEqual([]);
    }, 240_000);
  }
});
