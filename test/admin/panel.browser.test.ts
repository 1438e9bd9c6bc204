import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AxeBuilder } from '@axe-core/playwright';
import type { Browser, Page } from 'playwright-core';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { browserMissing, launchBrowser, newContext, saveScreenshot } from '../helpers/browser.ts';
import { makeUser } from '../helpers/factories.ts';
import { startReceiver } from '../webhooks/receiver.ts';

/** Signs `user` in through the real sign-in page, starting at an admin page. */
async function signIn(page: Page, app: TestApp, user: { username: string; password: string }, start = '/admin'): Promise<void> {
  await page.goto(`${app.url}${start}`);
  assert.equal(new URL(page.url()).pathname, '/login', 'sent to the sign-in page first');
  await page.getByLabel('Username').fill(user.username);
  await page.getByLabel('Password').fill(user.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForLoadState('domcontentloaded');
}

/** No WCAG 2 A/AA violations on the page. */
async function assertAccessible(page: Page, name: string): Promise<void> {
  const violations = (await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa']).analyze()).violations;
  assert.deepEqual(violations.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`), [], name);
}

describe('the admin panel in Chromium', { skip: browserMissing }, () => {
  let app: TestApp;
  let browser: Browser;
  let page: Page;
  let admin: Awaited<ReturnType<typeof makeUser>>;
  before(async () => {
    app = await startTestApp();
    browser = await launchBrowser();
    admin = await makeUser(app, { role: 'admin', fullName: 'Ada Admin' });
    page = await (await newContext(browser)).newPage();
    await signIn(page, app, admin);
    assert.equal(new URL(page.url()).pathname, '/admin', 'back at the admin page after signing in');
  });
  after(async () => {
    await browser?.close();
    await app?.close();
  });

  const tokenFor = (client: { client_id: string }, secret: string, username: string, localAddress?: string) =>
    app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: secret, username }, { localAddress });

  it('creates a client system and shows its secret once, on the page that follows; a reload no longer has it', async () => {
    const user = await makeUser(app);
    await page.goto(`${app.url}/admin/clients`);
    await page.getByLabel('Name').fill('Customer CRM');
    await page.getByLabel('Callback URL').fill('https://crm.example/sso/callback');
    await page.getByLabel('Allowed IP addresses').fill('127.0.0.1\n::1');
    const [answer] = await Promise.all([
      page.waitForResponse((r) => /\/admin\/clients\/[^/]+$/.test(new URL(r.url()).pathname) && r.request().method() === 'GET'),
      page.getByRole('button', { name: 'Register client system' }).click(),
    ]);
    assert.equal(await answer.headerValue('cache-control'), 'no-store', 'the page with the secret is never cached');
    const secretField = page.locator('input[data-secret]');
    const secret = await secretField.inputValue();
    assert.match(secret, /^[A-Za-z0-9_-]{43}$/);
    await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: app.url });
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByRole('button', { name: 'Copied' }).waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), secret, 'the copy button copies the secret');
    assert.match(await page.locator('.secret').innerText(), /shown only this once/);
    const clientId = (await page.locator('[data-field="client_id"]').innerText()).trim();
    assert.equal((await tokenFor({ client_id: clientId }, secret, user.username)).status, 200, 'the secret shown works');
    await assertAccessible(page, 'client created');
    await saveScreenshot(page, 'admin-client-created');

    await page.reload();
    assert.equal(await page.locator('input[data-secret]').count(), 0, 'gone after a reload');
    assert.ok(!(await page.content()).includes(secret));
    assert.equal(await page.locator('[data-field="masked-secret"]').innerText(), `••••••••${secret.slice(-4)}`);
    await page.goto(`${app.url}/admin/clients`);
    assert.ok(!(await page.content()).includes(secret), 'the list shows it masked');
    assert.equal(await page.locator(`tr[data-client-id="${clientId}"] .masked`).innerText(), `••••••••${secret.slice(-4)}`);
    await assertAccessible(page, 'clients');
    await saveScreenshot(page, 'admin-clients');
  });

  it('regenerates a secret after a confirmation; the new one is shown once and the old one fails at once', async () => {
    const user = await makeUser(app);
    const { client, secret: oldSecret } = await app.services.clients.createClient(
      { name: 'Team Wiki', callbackUrl: 'https://wiki.example/cb', allowedIps: ['127.0.0.1'] }, { via: 'cli' });
    await page.goto(`${app.url}/admin/clients/${client.client_id}`);
    await page.getByRole('link', { name: 'Regenerate secret…' }).click();
    await page.waitForURL(`**/admin/clients/${client.client_id}/regenerate`);
    assert.match(await page.getByRole('heading', { level: 1 }).innerText(), /Regenerate the secret of Team Wiki\?/);
    assert.equal((await tokenFor(client, oldSecret, user.username)).status, 200, 'nothing changes before the confirmation');
    await saveScreenshot(page, 'admin-client-regenerate');
    await page.getByRole('button', { name: 'Yes, regenerate the secret' }).click();
    await page.waitForURL(`**/admin/clients/${client.client_id}`);
    const newSecret = await page.locator('input[data-secret]').inputValue();
    assert.notEqual(newSecret, oldSecret);
    assert.match(await page.locator('.secret').innerText(), /previous secret no longer works/);
    assert.equal((await tokenFor(client, oldSecret, user.username)).status, 401);
    assert.equal((await tokenFor(client, newSecret, user.username)).status, 200);
    await page.reload();
    assert.equal(await page.locator('input[data-secret]').count(), 0);
  });

  it('edits the allow list: a bad entry is refused by name, a good one is saved and the token endpoint honours it at once', async () => {
    const user = await makeUser(app);
    const { client, secret } = await app.services.clients.createClient(
      { name: 'Payroll', callbackUrl: 'https://payroll.example/cb', allowedIps: ['127.0.0.2'] }, { via: 'cli' });
    assert.equal((await tokenFor(client, secret, user.username, '127.0.0.3')).status, 403);
    await page.goto(`${app.url}/admin/clients/${client.client_id}`);
    const ips = page.locator('#edit-ips');
    await ips.fill('127.0.0.3\n300.1.1.1\nnot-an-ip');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.waitForLoadState('domcontentloaded');
    assert.match(await page.getByRole('alert').innerText(), /Not an IP address or CIDR range: 300\.1\.1\.1, not-an-ip/);
    assert.equal(await page.locator('#edit-ips').inputValue(), '127.0.0.3\n300.1.1.1\nnot-an-ip', 'what was typed is kept for correcting');
    await saveScreenshot(page, 'admin-client-allowlist-refused');
    assert.deepEqual((await app.services.clients.findClient(client.client_id))?.allowed_ips, ['127.0.0.2'], 'nothing saved');

    await page.locator('#edit-ips').fill('0.0.0.0/0');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.waitForLoadState('domcontentloaded');
    assert.match(await page.getByRole('alert').innerText(), /0\.0\.0\.0\/0 admits every address; confirm/);
    assert.deepEqual((await app.services.clients.findClient(client.client_id))?.allowed_ips, ['127.0.0.2']);

    await page.locator('#edit-ips').fill('127.0.0.3');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.waitForURL(`**/admin/clients/${client.client_id}`);
    assert.match(await page.getByRole('status').first().innerText(), /was saved/);
    assert.equal(await page.locator('#edit-ips').inputValue(), '127.0.0.3');
    assert.equal((await tokenFor(client, secret, user.username, '127.0.0.3')).status, 200, 'the new address is admitted at once');
    assert.equal((await tokenFor(client, secret, user.username, '127.0.0.2')).status, 403, 'the old one is refused at once');

    await page.locator('#edit-ips').fill('0.0.0.0/0');
    await page.getByLabel(/admits every address, and want to save it anyway/).check();
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.waitForURL(`**/admin/clients/${client.client_id}`);
    assert.deepEqual((await app.services.clients.findClient(client.client_id))?.allowed_ips, ['0.0.0.0/0'], 'saved with the confirmation');
    await assertAccessible(page, 'client detail');
    await saveScreenshot(page, 'admin-client');

    await page.getByRole('button', { name: 'Deactivate' }).click();
    await page.waitForURL(`**/admin/clients/${client.client_id}`);
    assert.equal((await tokenFor(client, secret, user.username, '127.0.0.3')).status, 401, 'deactivated');
    await page.getByRole('button', { name: 'Reactivate' }).click();
    await page.waitForURL(`**/admin/clients/${client.client_id}`);
    assert.equal((await tokenFor(client, secret, user.username, '127.0.0.3')).status, 200, 'reactivated');
  });

  it('registers a webhook with event checkboxes and shows its delivery after a login', async () => {
    const receiver = await startReceiver();
    try {
      await page.goto(`${app.url}/admin/webhooks`);
      await page.getByLabel('Receiver URL').fill(receiver.url);
      await page.getByLabel('Signing secret').fill('a-long-signing-secret');
      await page.getByRole('checkbox', { name: /user\.login A user signed in/ }).check();
      await page.getByRole('checkbox', { name: /user\.locked/ }).check();
      await page.getByRole('button', { name: 'Register webhook' }).click();
      await page.waitForURL(/\/admin\/webhooks\/\d+$/);
      assert.match(await page.getByRole('status').first().innerText(), /registered/);
      assert.match(await page.locator('.page-heading').innerText(), /user\.login\s+user\.locked/);

      const user = await makeUser(app);
      assert.equal((await app.http.post('/api/auth/login', { login: user.username, password: user.password })).status, 200);
      await receiver.waitFor(() => receiver.of('user.login').some((r) => r.body.data.user_id === user.id));
      // The page shows what is recorded when it loads: wait until the attempt is recorded.
      for (let i = 0; i < 200; i++) {
        const r = await app.db.query<{ status: string }>("SELECT status FROM webhook_deliveries WHERE event = 'user.login' AND (data->>'user_id')::int = $1", [user.id]);
        if (r.rows[0]?.status === 'succeeded') break;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      await page.reload();
      const delivery = page.locator('.delivery').first();
      await delivery.locator('[data-field="delivery-status"]', { hasText: 'succeeded' }).waitFor();
      assert.equal(await delivery.locator('.delivery__event').innerText(), 'user.login');
      assert.equal(await delivery.locator('[data-field="status-code"]').first().innerText(), '200');
      await assertAccessible(page, 'webhook');
      await saveScreenshot(page, 'admin-webhook');

      const before = receiver.of('user.login').length;
      await delivery.getByRole('button', { name: 'Redeliver' }).click();
      await page.waitForURL(/\/admin\/webhooks\/\d+$/);
      await receiver.waitFor(() => receiver.of('user.login').length > before);

      await page.goto(`${app.url}/admin/webhooks`);
      const card = page.locator('.hook', { hasText: receiver.url });
      assert.match(await card.locator('[data-field="last-delivery"]').innerText(), /user\.login\s+succeeded · 200/);
      await assertAccessible(page, 'webhooks');
      await saveScreenshot(page, 'admin-webhooks');

      await card.getByRole('link').first().click();
      await page.getByRole('button', { name: 'Disable' }).click();
      await page.waitForURL(/\/admin\/webhooks\/\d+$/);
      assert.equal(await page.locator('[data-field="webhook-state"]').innerText(), 'Disabled');
      await page.getByRole('button', { name: 'Enable' }).click();
      await page.waitForURL(/\/admin\/webhooks\/\d+$/);
      assert.equal(await page.locator('[data-field="webhook-state"]').innerText(), 'Active');
      await page.getByLabel('Delete with its delivery log').check();
      await page.getByRole('button', { name: 'Delete' }).click();
      await page.waitForURL(/\/admin\/webhooks$/);
      assert.equal(await page.locator('.hook', { hasText: receiver.url }).count(), 0);
    } finally {
      await receiver.close();
    }
  });

  it('filters the audit log and offers CSV and NDJSON exports of the filtered view', async () => {
    const victim = await makeUser(app);
    await app.http.post('/api/auth/login', { login: victim.username, password: 'not the password' }, { localAddress: '127.0.0.2' });
    await app.http.post('/api/auth/login', { login: victim.username, password: victim.password });
    await page.goto(`${app.url}/admin/audit`);
    await page.getByLabel('User', { exact: true }).fill(victim.username);
    await page.getByLabel('Outcome').selectOption('failure');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/\/admin\/audit\?/);
    const rows = page.locator('tbody tr');
    assert.equal(await rows.count(), 1, 'only the failed login of that user');
    assert.match(await rows.first().innerText(), /user\.login\s+failure/);
    assert.match(await rows.first().innerText(), /127\.0\.0\.2/);
    const csvLink = await page.getByRole('link', { name: 'Export CSV' }).getAttribute('href');
    assert.match(String(csvLink), new RegExp(`user=${victim.username}.*outcome=failure.*format=csv`));
    const csv = await page.request.get(`${app.url}${csvLink}`);
    assert.equal(csv.status(), 200);
    assert.equal((await csv.text()).trim().split('\r\n').length, 2, 'the export holds the filtered rows');
    assert.match(String(await page.getByRole('link', { name: 'Export NDJSON' }).getAttribute('href')), /format=ndjson/);
    await assertAccessible(page, 'audit');
    await saveScreenshot(page, 'admin-audit');

    await page.getByLabel('Outcome').selectOption('');
    await page.getByLabel('IP address').fill('127.0.0.1');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/ip=127\.0\.0\.1/);
    assert.match(await page.locator('tbody tr').first().innerText(), /user\.login\s+success/);
  });

  it('manages users: search, create, edit, deactivate, see linked systems', async () => {
    const other = await makeUser(app, { fullName: 'Linus Linked' });
    const { client } = await app.services.clients.createClient({ name: 'Ticketing', callbackUrl: 'https://tickets.example/cb', allowedIps: [] }, { via: 'cli' });
    await app.db.query('INSERT INTO user_client_links (user_id, client_id, external_username) VALUES ($1, $2, $3)', [other.id, client.client_id, 'linus.t']);
    await page.goto(`${app.url}/admin/users`);
    await page.getByLabel('Search users').fill('Linus Linked');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.waitForURL(/q=Linus/);
    assert.equal(await page.locator('tbody tr').count(), 1);
    await assertAccessible(page, 'users');
    await saveScreenshot(page, 'admin-users');
    await page.getByRole('link', { name: other.username }).click();
    await page.waitForURL(`**/admin/users/${other.id}`);
    assert.match(await page.locator(`[data-linked-client="${client.client_id}"]`).innerText(), /Ticketing as linus\.t/);
    await assertAccessible(page, 'user');
    await saveScreenshot(page, 'admin-user');
    await page.getByLabel('Full name').fill('Linus Renamed');
    await page.getByRole('button', { name: 'Save profile' }).click();
    await page.waitForURL(`**/admin/users/${other.id}`);
    assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'Linus Renamed');
    await page.getByRole('button', { name: 'Deactivate' }).click();
    await page.waitForURL(`**/admin/users/${other.id}`);
    assert.equal(await page.locator('[data-field="active"]').innerText(), 'Inactive');

    const name = unique('newbie');
    await page.goto(`${app.url}/admin/users/new`);
    await saveScreenshot(page, 'admin-user-new');
    await page.getByLabel('Username').fill(name);
    await page.getByLabel('Full name').fill('New Person');
    await page.getByLabel('Email').fill('bad-address');
    await page.getByLabel('Initial password').fill('a good password');
    await page.locator('form.form').evaluate((f) => f.setAttribute('novalidate', ''));
    await page.getByRole('button', { name: 'Create user' }).click();
    await page.waitForLoadState('domcontentloaded');
    assert.match(await page.getByRole('alert').innerText(), /email is not a valid address/);
    assert.equal(await page.getByLabel('Username').inputValue(), name, 'kept for correcting');
    await page.getByLabel('Email').fill('new.person@example.com');
    await page.getByLabel('Initial password').fill('a good password');
    await page.getByRole('button', { name: 'Create user' }).click();
    await page.waitForURL(/\/admin\/users\/\d+$/);
    assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'New Person');
    assert.equal((await app.http.post('/api/auth/login', { login: name, password: 'a good password' })).status, 200);
  });

  it('shows the overview with the counts', async () => {
    await page.goto(`${app.url}/admin`);
    assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'Overview');
    assert.ok(Number(await page.locator('[data-stat="users"]').innerText()) >= 3);
    assert.ok(Number(await page.locator('[data-stat="tokens_issued_today"]').innerText()) >= 1);
    assert.ok(Number(await page.locator('[data-stat="failed_logins_24h"]').innerText()) >= 1);
    await assertAccessible(page, 'overview');
    await saveScreenshot(page, 'admin-overview');
    await page.setViewportSize({ width: 390, height: 844 });
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= 390), 'no sideways scrolling on a phone');
    await saveScreenshot(page, 'admin-overview-phone');
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it('reads well in the dark colour scheme (axe-core on each admin page)', async () => {
    const dark = await (await newContext(browser, { colorScheme: 'dark' })).newPage();
    await signIn(dark, app, admin);
    const { client } = await app.services.clients.createClient({ name: 'Dark Mode CRM', callbackUrl: 'https://dark.example/cb', allowedIps: ['127.0.0.1'] }, { via: 'cli' });
    for (const [path, name] of [['/admin', 'overview'], ['/admin/clients', 'clients'], [`/admin/clients/${client.client_id}`, 'client'], ['/admin/users', 'users'], ['/admin/webhooks', 'webhooks'], ['/admin/audit', 'audit']]) {
      await dark.goto(`${app.url}${path}`);
      await assertAccessible(dark, `${name} (dark)`);
    }
    await dark.goto(`${app.url}/admin/clients/${client.client_id}/regenerate`);
    await dark.getByRole('button', { name: 'Yes, regenerate the secret' }).click();
    await dark.waitForURL(`**/admin/clients/${client.client_id}`);
    await assertAccessible(dark, 'secret shown (dark)');
    await saveScreenshot(dark, 'admin-client-secret-dark');
  });

  it('refuses a non-admin everywhere with a 403 page and shows them no admin link', async () => {
    const member = await makeUser(app);
    const memberPage = await (await newContext(browser)).newPage();
    await signIn(memberPage, app, member, '/dashboard');
    await memberPage.waitForURL(`${app.url}/dashboard`);
    assert.equal(await memberPage.getByRole('link', { name: 'Administration' }).count(), 0);
    const webhook = await app.db.query<{ id: number }>('INSERT INTO webhooks (url, events, secret) VALUES ($1, $2, $3) RETURNING id', ['http://127.0.0.1:9/x', ['user.login'], 'sixteen-chars-secret']);
    for (const path of ['/admin', '/admin/clients', '/admin/clients/x', '/admin/users', '/admin/users/new', `/admin/users/${admin.id}`, '/admin/webhooks', `/admin/webhooks/${webhook.rows[0].id}`, '/admin/audit']) {
      const answer = await memberPage.goto(`${app.url}${path}`);
      assert.equal(answer?.status(), 403, path);
      assert.equal(await memberPage.getByRole('heading', { level: 1 }).innerText(), 'Not allowed', path);
    }
    const api = await memberPage.request.get(`${app.url}/api/admin/audit?format=csv`);
    assert.equal(api.status(), 403);
    await saveScreenshot(memberPage, 'admin-refused');
  });
});
