import { afterAll, beforeAll, expect } from 'vitest';
import type { Browser, Page, Response } from 'playwright-core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { axeResults, clickAndLoad, releaseBrowser, sharedBrowser } from '../helpers/browser.ts';

/**
 * For a describe block of browser tests: a test app listening on a port and this worker's
 * Chromium, handed to `ready` before the tests (assign them to the block's variables), and the
 * browser's contexts and the app released after them.
 */
export function browserSuite(ready: (suite: { app: TestApp; url: string; browser: Browser }) => void): void {
  let app: TestApp | undefined;
  let browser: Browser | undefined;
  beforeAll(async () => {
    app = await startTestApp();
    const url = await app.listen();
    browser = await sharedBrowser();
    ready({ app, url, browser });
  });
  afterAll(async () => {
    await releaseBrowser(browser);
    await app?.close();
  });
}

/** The phone size every page must fit without sideways scrolling. */
export const PHONE = { width: 390, height: 844, mobile: true };

/** Signs in through this service's own /login page (first step); returns the answer to the post. */
export async function signInPage(page: Page, baseUrl: string, login: string, password: string, start = '/login'): Promise<Response> {
  if (start && !page.url().includes(start)) await page.goto(`${baseUrl}${start}`);
  await page.getByLabel('Username').fill(login);
  await page.getByLabel('Password').fill(password);
  const [answer] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST' && ['/login', '/sso/login'].includes(new URL(r.url()).pathname)),
    clickAndLoad(page, page.getByRole('button', { name: 'Sign in', exact: true })),
  ]);
  return answer;
}

/** WCAG 2.x A/AA violations axe finds on the page, one line each; `skip` names rules left out. */
export async function axeViolations(page: Page, skip: string[] = []): Promise<string[]> {
  const result = await axeResults(page, ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'], skip);
  return result.violations.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`);
}

/** Fails with the page's name when axe finds anything. */
export async function expectAccessible(page: Page, name: string): Promise<void> {
  expect(await axeViolations(page), `axe on ${name}`).toStrictEqual([]);
}

/** How wide the page is against the viewport, and the widest elements that stick out (for the message). */
export async function overflow(page: Page): Promise<{ scrollWidth: number; innerWidth: number; culprits: string[] }> {
  // The width the context was given, not window.innerWidth: in a mobile context (isMobile)
  // Chromium widens the layout viewport to fit content that sticks out, and zooms out, so
  // innerWidth and scrollWidth grow together and the overflow would go unseen.
  const width = page.viewportSize()?.width;
  return page.evaluate((given) => {
    const innerWidth = given ?? window.innerWidth;
    const culprits: string[] = [];
    // content scrolling inside a box of its own (overflow-x: auto) does not widen the page
    const clipped = (el: Element): boolean => {
      for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
        if (getComputedStyle(p).overflowX !== 'visible') return true;
      }
      return false;
    };
    for (const el of Array.from(document.querySelectorAll('body *'))) {
      const r = el.getBoundingClientRect();
      if (r.right > innerWidth + 0.5 && r.width > 0 && !clipped(el)) {
        culprits.push(`${el.tagName.toLowerCase()}${el.id ? `#${el.id}` : ''}${el.className && typeof el.className === 'string' ? `.${el.className.split(' ').join('.')}` : ''} right=${Math.round(r.right)}`);
      }
    }
    return { scrollWidth: document.documentElement.scrollWidth, innerWidth, culprits: culprits.slice(0, 8) };
  }, width);
}

/** Fails when the document is wider than the viewport (sideways scrolling of the page). */
export async function expectNoOverflow(page: Page, name: string): Promise<void> {
  const o = await overflow(page);
  expect(o.scrollWidth, `${name} is ${o.scrollWidth}px wide at ${o.innerWidth}px: ${o.culprits.join(', ')}`).toBeLessThanOrEqual(o.innerWidth);
}

/** The text of the page's error banner(s). */
export async function alertText(page: Page): Promise<string> {
  return (await page.getByRole('alert').allInnerTexts()).join(' ').trim();
}
