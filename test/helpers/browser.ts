import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';

/** Debian's Chromium (`apt-get install chromium`; .ci/run installs it). CHROMIUM_PATH overrides. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * Why the browser tests cannot run here, or false when they can. Pass it as node:test's
 * `skip` option: the run then reports each browser test as skipped with this reason.
 */
export const browserMissing: string | false = existsSync(CHROMIUM_PATH)
  ? false
  : `browser tests skipped: no Chromium at ${CHROMIUM_PATH} (install it with: apt-get install -y chromium)`;

if (browserMissing) console.log(`# ${browserMissing}`);

/** Where screenshots go (gitignored). */
export const RESULTS_DIR = path.resolve('test-results');

/** Starts headless Chromium with the flags a container and CI need. */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

/** A fresh browser profile (own cookies): one per simulated person. Desktop size unless told. */
export function newContext(
  browser: Browser,
  options: { width?: number; height?: number; mobile?: boolean; colorScheme?: 'light' | 'dark' } = {},
): Promise<BrowserContext> {
  return browser.newContext({
    viewport: { width: options.width ?? 1280, height: options.height ?? 800 },
    deviceScaleFactor: 1,
    isMobile: options.mobile ?? false,
    hasTouch: options.mobile ?? false,
    colorScheme: options.colorScheme ?? 'light',
    locale: 'en-US',
  });
}

/** Saves a full-page screenshot as test-results/<name>.png and returns its path. */
export async function saveScreenshot(page: Page, name: string): Promise<string> {
  await mkdir(RESULTS_DIR, { recursive: true });
  const file = path.join(RESULTS_DIR, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

/**
 * Records every document answer of the page's main frame (URL and status, redirects
 * included), so a test can prove which pages the browser saw on its way.
 */
export function recordNavigation(page: Page): Array<{ url: string; status: number }> {
  const seen: Array<{ url: string; status: number }> = [];
  page.on('response', (response) => {
    const request = response.request();
    if (request.resourceType() === 'document' && request.frame() === page.mainFrame()) {
      seen.push({ url: response.url(), status: response.status() });
    }
  });
  return seen;
}
