import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { AxeBuilder } from '@axe-core/playwright';
import { type Browser, type BrowserContext, chromium, type Locator, type Page } from 'playwright-core';

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
function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

const SHARED = Symbol.for('auth-service.test.shared-browser');
type SharedHolder = { [SHARED]?: Promise<Browser> };

/**
 * The Chromium of this test process, started by the first browser file it runs and used by
 * every later one (kept on globalThis: with vitest's isolate:false a worker process runs
 * file after file): a launch and its first page cost ~0.5 s on a quiet machine, more with
 * two workers. Each file is still on its own: everything it does is in browser contexts
 * (own cookies, storage, permissions) that `releaseBrowser` closes at the end of the file.
 * Chromium ends with the process (Playwright kills it on exit), or is launched again if it
 * went away.
 */
export function sharedBrowser(): Promise<Browser> {
  const holder = globalThis as SharedHolder;
  let browser = holder[SHARED];
  if (!browser) {
    browser = launchBrowser();
    holder[SHARED] = browser;
    browser.then((b) => b.on('disconnected', () => {
      if (holder[SHARED] === browser) delete holder[SHARED];
    }), () => {
      if (holder[SHARED] === browser) delete holder[SHARED];
    });
  }
  return browser;
}

/** The end of a file's use of the shared Chromium: closes every context (and page) it opened. */
export async function releaseBrowser(browser: Browser | undefined): Promise<void> {
  if (!browser?.isConnected()) return;
  await Promise.all(browser.contexts().map((context) => context.close()));
}

/**
 * axe-core's results for the page, for the given tags. On a page without frames this runs
 * axe.run() in the page (AxeBuilder's legacy mode), which reports exactly what the default
 * mode does there, in half the time: the default runs axe.runPartial() per frame and then
 * axe.finishRun() in a new blank page, injecting axe-core into both. A page with frames
 * gets the default mode, which also checks cross-origin frames.
 */
export async function axeResults(page: Page, tags: string[], skip: string[] = []): ReturnType<AxeBuilder['analyze']> {
  const builder = new AxeBuilder({ page }).withTags(tags);
  if (skip.length > 0) builder.disableRules(skip);
  if (page.frames().length === 1) builder.setLegacyMode();
  return builder.analyze();
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

/**
 * Clicks `target` (a submit button or link) and returns once the document it leads to is
 * parsed. Waiting for the page's next `domcontentloaded` event, armed before the click,
 * cannot be satisfied by the page being left: `page.waitForLoadState()` after the click
 * can, because until the new answer commits the old document still counts as loaded, and a
 * busy machine then reads the old page.
 */
export async function clickAndLoad(page: Page, target: Locator): Promise<void> {
  await Promise.all([page.waitForEvent('domcontentloaded'), target.click()]);
}

/**
 * Waits for `waiting` (a page wait after a form); when it fails, the error also says where the
 * page ended and the start of what it showed (such a wait timed out in CI runs on a loaded
 * machine, with nothing to tell why).
 */
export async function saying(page: Page, step: string, waiting: Promise<unknown>): Promise<void> {
  await waiting.catch(async (err: Error) => {
    const shown = (await page.locator('body').innerText().catch(() => '')).slice(0, 600);
    throw new Error(`${err.message}\n${step}: the page is ${page.url()}\n${shown}`);
  });
}

/**
 * Saves a full-page screenshot as test-results/<name>.png and returns its path. Chromium
 * sometimes has no frame to give right after a navigation on a busy machine ("Unable to
 * capture screenshot", seen once in CI): that error is tried again, twice, a moment later.
 */
export async function saveScreenshot(page: Page, name: string, options: { fullPage?: boolean } = {}): Promise<string> {
  await mkdir(RESULTS_DIR, { recursive: true });
  const file = path.join(RESULTS_DIR, `${name}.png`);
  for (let attempt = 1; ; attempt++) {
    try {
      await page.screenshot({ path: file, fullPage: options.fullPage ?? true });
      return file;
    } catch (err) {
      if (attempt === 3 || !/Unable to capture screenshot/.test(String(err))) throw err;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
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
