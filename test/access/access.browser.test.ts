import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { browserMissing, clickAndLoad, newContext, recordNavigation, releaseBrowser, saveScreenshot, sharedBrowser } from '../helpers/browser.ts';
import { makeUser } from '../helpers/factories.ts';
import { axeViolations } from '../pages/browser-support.ts';
import { startTestClient, type TestClient } from '../pages/test-client.ts';

const CLI = { via: 'cli' as const, username: 'test' };

async function signIn(page: Page, login: string, password: string): Promise<void> {
  await page.getByLabel('Username').fill(login);
  await page.getByLabel('Password').fill(password);
  await clickAndLoad(page, page.getByRole('button', { name: 'Sign in', exact: true }));
}

/** A restricted client in Chromium: the sign-in page, the launcher and its one click (docs/access.md). */
describe.skipIf(browserMissing)('access rules in the browser', () => {
  let app: TestApp;
  let second: TestApp;
  let browser: Browser;
  let billing: TestClient;
  let wiki: TestClient;
  let group: string;
  beforeAll(async () => {
    app = await startTestApp();
    second = await startTestApp({}, { db: app.db, databaseUrl: app.databaseUrl });
    browser = await sharedBrowser();
    billing = await startTestClient(app, { name: 'Billing' });
    wiki = await startTestClient(app, { name: 'Team Wiki' });
    group = unique('finance-');
    await app.services.access.createGroup(group, CLI);
    await app.services.clients.updateClient(billing.client_id, { allowGroups: [group] }, CLI);
    await app.services.webhooks.register({ url: 'http://127.0.0.1:9/hook', events: ['user.login'], secret: 'sixteen-chars-secret' }, { via: 'cli' });
  });
  afterAll(async () => {
    await releaseBrowser(browser);
    await billing?.close();
    await wiki?.close();
    await second?.stop();
    await app?.close();
  });

  const tile = (page: Page, clientId: string) => page.locator(`li[data-client-id="${clientId}"]`);
  const clientLogins = async (userId: number) =>
    (await app.db.query("SELECT 1 FROM webhook_deliveries WHERE event = 'user.login' AND (data->>'user_id')::int = $1 AND data->>'client_system' <> 'auth-service'", [userId])).rowCount;

  it('shows an outsider the refusal page with no token, no tile and no one-click; added to the group, all three work at once on the other instance', async () => {
    const user = await makeUser(app);
    const context = await newContext(browser);
    const page = await context.newPage();
    const seen = recordNavigation(page);

    // the sign-in page of the restricted client
    await page.goto(billing.loginUrl());
    await signIn(page, user.username, user.password);
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('You do not have access to Billing');
    expect(seen.at(-1)?.status).toBe(403);
    expect(seen.some((s) => s.url.includes('token=')), 'no redirect carries a token').toBe(false);
    expect(billing.visits).toHaveLength(0);
    expect(await axeViolations(page)).toStrictEqual([]);
    await saveScreenshot(page, 'access-refused');
    const refused = await app.db.query<{ client_id: string; reason: string }>(
      "SELECT client_id, details->>'reason' AS reason FROM audit_log WHERE action = 'user.login' AND user_id = $1 AND outcome = 'failure'", [user.id]);
    expect(refused.rows).toStrictEqual([{ client_id: billing.client_id, reason: 'access_denied' }]);
    expect(await app.db.query("SELECT 1 FROM webhook_deliveries WHERE event = 'user.login' AND (data->>'user_id')::int = $1", [user.id]).then((r) => r.rowCount),
      'no user.login at all: the sign-in was refused').toBe(0);

    // the launcher, on the second instance: the open client only
    const dashboard = `${await second.listen()}/dashboard`;
    await page.goto(dashboard);
    await signIn(page, user.username, user.password);
    await page.waitForURL(dashboard);
    expect(await tile(page, wiki.client_id).count()).toBe(1);
    expect(await tile(page, billing.client_id).count(), 'no tile for a system the user may not use').toBe(0);
    // a hand-made one-click form for it, with a valid CSRF token: the refusal page, no token
    const csrf = await page.locator('input[name=_csrf]').first().inputValue();
    const forged = await page.request.post(`${await second.listen()}/dashboard/sign-in`, { form: { _csrf: csrf, client_id: billing.client_id }, maxRedirects: 0 });
    expect(forged.status()).toBe(403);
    expect(await forged.text()).toContain('You do not have access to Billing');
    expect(billing.visits).toHaveLength(0);
    // signed in now (one session store for both instances): the sign-in page refuses at once, no token
    await page.goto(billing.loginUrl());
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('You do not have access to Billing');
    expect(seen.some((s) => s.url.includes('token=')), 'no redirect carries a token').toBe(false);
    expect(billing.visits).toHaveLength(0);
    expect(await clientLogins(user.id)).toBe(0);

    // into the group, through the first instance: the second shows and opens it at once
    await app.services.access.addToGroup(user.id, group, CLI);
    await page.goto(dashboard);
    const card = tile(page, billing.client_id);
    expect(await card.count()).toBe(1);
    expect(await card.locator('h3').textContent()).toBe('Billing');
    await clickAndLoad(page, card.getByRole('button', { name: 'Open Billing' }));
    await page.waitForURL(`${billing.origin}/callback?**`);
    expect(await page.locator('#who').textContent()).toBe(`Hello ${user.username}`);
    const visit = billing.visits.at(-1)!;
    const claims = JSON.parse(Buffer.from(String(visit.token).split('.')[1], 'base64url').toString());
    expect(claims.roles).toStrictEqual(['user', `group:${group}`]);

    // and the sign-in page sends a signed-in member straight on
    await page.goto(billing.loginUrl());
    await page.waitForURL(`${billing.origin}/callback?**`);
    expect(billing.visits.at(-1)!.status).toBe(200);
    expect(await clientLogins(user.id)).toBe(2);
    await context.close();
  });

  it('hides a client that is not listed from the launcher, while its rule still admits', async () => {
    const user = await makeUser(app);
    await app.services.clients.updateClient(wiki.client_id, { listed: false }, CLI);
    try {
      const context = await newContext(browser);
      const page = await context.newPage();
      await page.goto(`${await app.listen()}/dashboard`);
      await signIn(page, user.username, user.password);
      expect(await page.getByRole('heading', { level: 1 }).textContent()).toMatch(/^Welcome/);
      expect(await tile(page, wiki.client_id).count()).toBe(0);
      await page.goto(wiki.loginUrl());
      await page.waitForURL(`${wiki.origin}/callback?**`);
      await context.close();
    } finally {
      await app.services.clients.updateClient(wiki.client_id, { listed: true }, CLI);
    }
  });
});
