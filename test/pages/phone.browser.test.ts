import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { browserMissing, clickAndLoad, newContext, releaseBrowser, saveScreenshot, sharedBrowser } from '../helpers/browser.ts';
import { makeUser } from '../helpers/factories.ts';
import { totpCode } from '../auth/support.ts';
import { axeViolations, expectNoOverflow, overflow, PHONE, signInPage } from './browser-support.ts';

/** A tiny local logo (a data: image, as BRAND_LOGO_URL and client logos allow). */
const LOGO = `data:image/svg+xml;base64,${Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="120" height="40"><rect width="120" height="40" fill="#0a7"/></svg>').toString('base64')}`;

const SIZES = [
  { name: 'phone', ...PHONE },
  { name: 'desktop', width: 1280, height: 800, mobile: false },
];

/**
 * Every page, in each page state a person meets, at 390x844 and at 1280x800: the page is
 * never wider than the viewport (no sideways scrolling of the page itself) and axe finds no
 * WCAG 2.1 A/AA violation. Long names, long URLs and wide tables are in the data on purpose.
 */
describe.skipIf(browserMissing)('every page fits a phone, passes axe and logs no console error, in Chromium', () => {
  let app: TestApp;
  let url: string;
  let browser: Browser;
  let admin: Awaited<ReturnType<typeof makeUser>>;
  let member: Awaited<ReturnType<typeof makeUser>>;
  let clientId: string;
  let webhookId: number;
  beforeAll(async () => {
    app = await startTestApp({ WEBHOOK_BACKOFF_MS: '60000' });
    url = await app.listen();
    browser = await sharedBrowser();
    admin = await makeUser(app, { role: 'admin', fullName: 'Ada Administrator-With-A-Rather-Long-Surname' });
    member = await makeUser(app, { fullName: 'Grace Member' });
    const cli = { via: 'cli' as const };
    const { client } = await app.services.clients.createClient({
      name: 'Customer Relationship Management (Sales, Northern Europe)', callbackUrl: 'https://crm.sales.northern-europe.example.com/sso/callback/with/a/long/path',
      allowedIps: ['203.0.113.10', '2001:db8:1234:5678::/64', '10.20.0.0/16'], logoUrl: LOGO,
    }, cli);
    clientId = client.client_id;
    await app.services.clients.createClient({ name: 'Team Wiki', callbackUrl: 'https://wiki.example/cb', allowedIps: ['127.0.0.1'] }, cli);
    for (let i = 0; i < 3; i++) await makeUser(app, { email: `someone.with.a.very.long.address.${i}@subdivision.example-organisation.com` });
    // a webhook whose receiver refuses connections: its delivery log fills with failed attempts
    const hook = await app.services.webhooks.register({ url: 'http://127.0.0.1:9/hooks/authentication-events/receiver', secret: 'sixteen-chars-secret!', events: ['user.login', 'user.login_failed'] }, cli);
    webhookId = hook.id;
    await app.http.post('/api/auth/login', { login: member.username, password: 'wrong' });
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      const r = await app.db.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1 AND attempts > 0', [webhookId]);
      if (Number(r.rows[0].n) > 0) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  });
  afterAll(async () => {
    await releaseBrowser(browser);
    await app?.close();
  });

  /**
   * Checks the page as it is now: not wider than the viewport, no axe violations; saves a
   * screenshot, of the whole page unless `firstScreen` (the reference page: a full-page picture
   * of it took 19 to 23 s on a 2-core machine, a third of the test's time, and checks nothing).
   */
  async function check(page: Page, size: string, name: string, problems: string[], options: { firstScreen?: boolean } = {}): Promise<void> {
    await page.waitForLoadState('load');
    const o = await overflow(page);
    if (o.scrollWidth > o.innerWidth) problems.push(`${name}: ${o.scrollWidth}px wide at ${o.innerWidth}px (${o.culprits.join(', ')})`);
    for (const v of await axeViolations(page)) problems.push(`${name}: ${v}`);
    await saveScreenshot(page, `${size}-${name}`, { fullPage: !options.firstScreen });
  }

  /** Console errors of the page's own scripts and styles (an error status of a page itself is expected in some states). */
  function watchConsole(page: Page, problems: string[]): Page {
    page.on('console', (m) => {
      if (m.type() === 'error' && !/Failed to load resource: the server responded with a status of (400|401|403|404|423)/.test(m.text())) {
        problems.push(`console error at ${page.url()}: ${m.text()}`);
      }
    });
    page.on('pageerror', (e) => problems.push(`script error at ${page.url()}: ${e.message}`));
    return page;
  }

  for (const size of SIZES) {
    const open = async (): Promise<BrowserContext> => newContext(browser, size);

    it(`${size.name}: the sign-in pages, the signed-out page and the error pages`, async () => {
      const problems: string[] = [];
      const page = watchConsole(await (await open()).newPage(), problems);
      await page.goto(`${url}/login`);
      await check(page, size.name, 'login', problems);
      await signInPage(page, url, member.username, 'not the password', '');
      await check(page, size.name, 'login-refused', problems);
      await page.goto(`${url}/sso/login?client_id=${clientId}&state=s`);
      await check(page, size.name, 'login-client', problems);
      await page.goto(`${url}/no/such/page`);
      await check(page, size.name, 'error-404', problems);
      await page.goto(`${url}/sso/login?client_id=nobody`);
      await check(page, size.name, 'error-400', problems);
      await page.goto(`${url}/sso/logout`);
      await check(page, size.name, 'signed-out', problems);
      expect(problems).toStrictEqual([]);
    });

    // the reference page (/docs, drawn by Redoc) has its own file: test/pages/api-reference.browser.test.ts

    // the dashboard and the account security page in two tests: in one they took 40 to 44 s on a busy 2-core machine
    it(`${size.name}: the dashboard with a refused and a saved link, and the 403 page`, async () => {
      const problems: string[] = [];
      const user = await makeUser(app, { fullName: 'Bartholomew Featherstonehaugh-Cholmondeley' });
      const page = watchConsole(await (await open()).newPage(), problems);
      await signInPage(page, url, user.username, user.password);
      await page.locator(`#link-${clientId}`).fill('   ');
      await clickAndLoad(page, page.locator(`[data-client-id="${clientId}"]`).getByRole('button', { name: 'Link' }));
      await page.waitForURL('**/dashboard');
      await check(page, size.name, 'dashboard-link-refused', problems);
      await page.locator(`#link-${clientId}`).fill('bartholomew.featherstonehaugh');
      await clickAndLoad(page, page.locator(`[data-client-id="${clientId}"]`).getByRole('button', { name: 'Link' }));
      await page.waitForURL('**/dashboard');
      await check(page, size.name, 'dashboard', problems);
      await page.goto(`${url}/admin`);
      await check(page, size.name, 'error-403', problems);
      expect(problems).toStrictEqual([]);
    });

    it(`${size.name}: the password and sessions pages, and forgot and reset password`, async () => {
      const problems: string[] = [];
      const user = await makeUser(app, { fullName: 'Bartholomew Featherstonehaugh-Cholmondeley' });
      // a second session, from a program whose User-Agent the page shows as it is: one long word
      await app.http.post('/api/auth/login', { login: user.username, password: user.password }, {
        headers: { 'user-agent': 'CorporateDirectorySyncAgent/12.4.1-build.20261126+linux-x86_64-glibc2.36' },
      });
      const page = watchConsole(await (await open()).newPage(), problems);
      await signInPage(page, url, user.username, user.password);
      await page.goto(`${url}/account/password`);
      await check(page, size.name, 'account-password', problems);
      await page.goto(`${url}/account/sessions`);
      expect(await page.locator('tr[data-session]').count()).toBe(2);
      await check(page, size.name, 'account-sessions', problems);
      const visitor = watchConsole(await (await open()).newPage(), problems);
      await visitor.goto(`${url}/forgot-password`);
      await check(visitor, size.name, 'forgot-password', problems);
      await visitor.goto(`${url}/reset-password?token=no-such-link`);
      await check(visitor, size.name, 'reset-password-refused', problems);
      expect(problems).toStrictEqual([]);
    });

    it(`${size.name}: the account security page in each state and the second sign-in step`, async () => {
      const problems: string[] = [];
      const user = await makeUser(app, { fullName: 'Bartholomew Featherstonehaugh-Cholmondeley' });
      const page = watchConsole(await (await open()).newPage(), problems);
      await signInPage(page, url, user.username, user.password);
      await page.goto(`${url}/account/security`);
      await check(page, size.name, 'security-off', problems);
      await clickAndLoad(page, page.getByRole('button', { name: 'Set up two-step verification' }));
      await page.waitForURL('**#setup');
      await check(page, size.name, 'security-setup', problems);
      const secret = (await page.locator('[data-field="totp-secret"]').innerText()).replace(/\s+/g, '');
      await page.getByLabel('Your current password').fill(user.password);
      await page.getByLabel('Enter the 6-digit code the app shows').fill(await totpCode(secret, -1));
      await clickAndLoad(page, page.getByRole('button', { name: 'Turn on two-step verification' }));
      await page.waitForURL('**#recovery-codes');
      await check(page, size.name, 'security-codes', problems);
      await page.locator('#disable-code').fill('not-a-code');
      await clickAndLoad(page, page.getByRole('button', { name: 'Turn off' }));
      await check(page, size.name, 'security-refused', problems);
      const other = watchConsole(await (await open()).newPage(), problems);
      await signInPage(other, url, user.username, user.password, `/sso/login?client_id=${clientId}`);
      await check(other, size.name, 'login-second-step', problems);
      expect(problems).toStrictEqual([]);
    });

    /** Signs the administrator in on a new page and checks each of `pages` ([name, path]) on it. */
    const checkAdminPages = async (pages: ReadonlyArray<readonly [string, string]>, problems: string[]): Promise<Page> => {
      const page = watchConsole(await (await open()).newPage(), problems);
      await signInPage(page, url, admin.username, admin.password, '/login?next=/admin');
      for (const [name, path] of pages) {
        await page.goto(`${url}${path}`);
        await check(page, size.name, name, problems);
      }
      return page;
    };

    // the admin pages in two tests of a handful of page loads each: eleven in one took 60 s on a slow 2-core machine
    it(`${size.name}: the admin overview, client and user list pages`, async () => {
      const problems: string[] = [];
      await checkAdminPages([
        ['admin-overview', '/admin'], ['admin-clients', '/admin/clients'], ['admin-client', `/admin/clients/${clientId}`],
        ['admin-client-regenerate', `/admin/clients/${clientId}/regenerate`], ['admin-users', '/admin/users'],
      ], problems);
      expect(problems).toStrictEqual([]);
    });

    it(`${size.name}: the other admin pages, and a refused form`, async () => {
      const problems: string[] = [];
      const page = await checkAdminPages([
        ['admin-user-new', '/admin/users/new'], ['admin-user', `/admin/users/${member.id}`], ['admin-webhooks', '/admin/webhooks'],
        ['admin-webhook', `/admin/webhooks/${webhookId}`], ['admin-audit', '/admin/audit'],
      ], problems);
      await page.goto(`${url}/admin/clients`);
      await page.locator('#new-name').fill('Refused');
      await page.locator('#new-callback').fill('ftp://files.example.com/a/really/long/callback/path/that/goes/on');
      await page.locator('#new-ips').fill('300.1.1.1');
      await clickAndLoad(page, page.getByRole('button', { name: 'Register client system' }));
      await check(page, size.name, 'admin-clients-refused', problems);
      expect(problems).toStrictEqual([]);
    });
  }

  it('measures the width the way the issue states it: document.documentElement.scrollWidth <= innerWidth', async () => {
    const page = await (await newContext(browser, PHONE)).newPage();
    await page.goto(`${url}/docs`);
    await page.locator('[data-section-id^="tag/"]').first().waitFor({ state: 'attached', timeout: 60_000 });
    await expectNoOverflow(page, '/docs');
  });
});
