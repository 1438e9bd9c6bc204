import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { seedDemo } from '../../src/demo/seed.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { axeResults, browserMissing, clickAndLoad, newContext, releaseBrowser, saveScreenshot, saying, sharedBrowser } from '../helpers/browser.ts';
import { makeUser } from '../helpers/factories.ts';
import { startTestClient, type TestClient } from './test-client.ts';

function claimsOf(token: string | null): Record<string, unknown> {
  return JSON.parse(Buffer.from(String(token).split('.')[1], 'base64url').toString());
}

describe.skipIf(browserMissing)('the dashboard and the demo in Chromium', () => {
  let app: TestApp;
  let browser: Browser;
  let crm: TestClient;
  let wiki: TestClient;
  beforeAll(async () => {
    app = await startTestApp();
    browser = await sharedBrowser();
    crm = await startTestClient(app, { name: 'Customer CRM' });
    wiki = await startTestClient(app, { name: 'Team Wiki' });
  });
  afterAll(async () => {
    await releaseBrowser(browser);
    await crm?.close();
    await wiki?.close();
    await app?.close();
  });

  it('signs in at /dashboard, links a system (pending, own name), the system confirms, one click signs in as the linked name, unlinks', async () => {
    const user = await makeUser(app, { fullName: 'Grace Hopper' });
    const context = await newContext(browser);
    const page = await context.newPage();
    await page.goto(`${await app.listen()}/dashboard`);
    expect(new URL(page.url()).pathname, 'signed-out visitors are sent to sign in').toBe('/login');
    expect((await page.locator('.auth__lead').textContent()) ?? '').toMatch(/your account dashboard/);
    await page.getByLabel('Username').fill(user.username);
    await page.getByLabel('Password').fill(user.password);
    await clickAndLoad(page, page.getByRole('button', { name: 'Sign in', exact: true }));
    await page.waitForURL(`${await app.listen()}/dashboard`);
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Welcome, Grace Hopper');

    const card = page.locator(`li[data-client-id="${crm.client_id}"]`);
    await card.getByLabel('Your username at Customer CRM').fill('g.hopper');
    await clickAndLoad(page, card.getByRole('button', { name: 'Link' }));
    await saying(page, 'after Link', page.waitForURL(`${await app.listen()}/dashboard`));
    // a typed name is only a claim: pending, and tokens keep naming the user's own account
    expect(await page.getByRole('status').innerText()).toMatch(/Link requested: g\.hopper is awaiting confirmation/);
    expect(await card.locator('.system__username').textContent()).toBe('g.hopper');
    expect(await card.locator('.badge').textContent()).toBe('Pending');
    const violations = (await axeResults(page, ['wcag2a', 'wcag2aa'])).violations;
    expect(violations.map((v) => `${v.id}: ${v.help}`)).toStrictEqual([]);
    await clickAndLoad(page, card.getByRole('button', { name: 'Open Customer CRM' }));
    await page.waitForURL(`${crm.origin}/callback?**`);
    expect(claimsOf(crm.visits.at(-1)!.token).username, 'a pending link lends no name').toBe(user.username);

    // the CRM proves the link, server to server with its credentials
    const confirmed = await fetch(`${await app.listen()}/api/sso/links/confirm`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_id: crm.client_id, client_secret: crm.client_secret, user_id: user.id, username: 'g.hopper' }),
    });
    expect(confirmed.status).toBe(200);
    await page.goto(`${await app.listen()}/dashboard`);
    expect(await card.locator('.badge').textContent()).toBe('Linked');
    const linkedViolations = (await axeResults(page, ['wcag2a', 'wcag2aa'])).violations;
    expect(linkedViolations.map((v) => `${v.id}: ${v.help}`)).toStrictEqual([]);
    await saveScreenshot(page, 'dashboard');
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= 390), 'no sideways scrolling on a phone').toBeTruthy();
    await saveScreenshot(page, 'dashboard-phone');
    await page.setViewportSize({ width: 1280, height: 800 });

    const [answer] = await Promise.all([
      page.waitForResponse((r) => new URL(r.url()).pathname === '/dashboard/sign-in'),
      clickAndLoad(page, card.getByRole('button', { name: 'Open Customer CRM' })),
    ]);
    expect(answer.status()).toBe(303);
    expect(await answer.headerValue('cache-control')).toBe('no-store');
    await page.waitForURL(`${crm.origin}/callback?**`);
    const visit = crm.visits.at(-1)!;
    expect(visit.status, 'the client validated the token').toBe(200);
    expect(visit.answer.user.id).toBe(user.id);
    expect(claimsOf(visit.token).username, 'the username claim is the proven linked name').toBe('g.hopper');
    expect(claimsOf(visit.token).client_id).toBe(crm.client_id);

    await page.goto(`${await app.listen()}/dashboard`);
    await clickAndLoad(page, card.getByRole('button', { name: 'Unlink Customer CRM' }));
    await page.waitForURL(`${await app.listen()}/dashboard`);
    expect(await card.locator('.badge').count(), 'no link, no badge').toBe(0);
    expect(await card.getByRole('button', { name: 'Open Customer CRM' }).count(), 'the launcher still opens it').toBe(1);
    const links = await app.db.query('SELECT 1 FROM user_client_links WHERE user_id = $1', [user.id]);
    expect(links.rowCount).toBe(0);
    await context.close();
  });

  it('opens a system that is not linked with one click, under the user\'s own name', async () => {
    const user = await makeUser(app);
    const context = await newContext(browser);
    const page = await context.newPage();
    await page.goto(`${await app.listen()}/login`);
    await page.getByLabel('Username').fill(user.username);
    await page.getByLabel('Password').fill(user.password);
    await clickAndLoad(page, page.getByRole('button', { name: 'Sign in', exact: true }));
    await page.waitForURL(`${await app.listen()}/dashboard`);
    const card = page.locator(`li[data-client-id="${wiki.client_id}"]`);
    expect(await card.getAttribute('data-link-status')).toBe('none');
    await clickAndLoad(page, card.getByRole('button', { name: 'Open Team Wiki' }));
    await page.waitForURL(`${wiki.origin}/callback?**`);
    expect(claimsOf(wiki.visits.at(-1)!.token).username).toBe(user.username);
    expect(wiki.visits.at(-1)!.status).toBe(200);
    await context.close();
  });

  it('walks a newcomer through the demo: sign in, land on /demo/callback, see the user the token names', async () => {
    const demo = await seedDemo(app.services, { baseUrl: (await app.listen()), dataDir: app.config.DATA_DIR });
    const context = await newContext(browser);
    const page = await context.newPage();
    await page.goto(demo.login_url);
    expect((await page.locator('.auth__lead').textContent()) ?? '').toMatch(/Demo client system/);
    await page.getByLabel('Username').fill(demo.username);
    await page.getByLabel('Password').fill(demo.password);
    await clickAndLoad(page, page.getByRole('button', { name: 'Sign in', exact: true }));
    await page.waitForURL(`${await app.listen()}/demo/callback?**`);
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Signed in as demo');
    expect(await page.getByTestId('demo-username').textContent()).toBe('demo');
    await saveScreenshot(page, 'demo-callback');

    const reload = await page.reload();
    expect(reload?.status(), 'the token is single-use').toBe(401);
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('The token was refused');
    await context.close();
  });
});
