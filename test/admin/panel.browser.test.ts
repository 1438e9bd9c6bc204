import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { axeResults, browserMissing, clickAndLoad, newContext, releaseBrowser, saveScreenshot, sharedBrowser } from '../helpers/browser.ts';
import { makeUser } from '../helpers/factories.ts';
import { startReceiver } from '../webhooks/receiver.ts';

/** Signs `user` in through the real sign-in page, starting at an admin page. */
async function signIn(page: Page, app: TestApp, user: { username: string; password: string }, start = '/admin'): Promise<void> {
  await page.goto(`${await app.listen()}${start}`);
  expect(new URL(page.url()).pathname, 'sent to the sign-in page first').toBe('/login');
  await page.getByLabel('Username').fill(user.username);
  await page.getByLabel('Password').fill(user.password);
  await clickAndLoad(page, page.getByRole('button', { name: 'Sign in', exact: true }));
}

/** No WCAG 2 A/AA violations on the page. */
async function assertAccessible(page: Page, name: string): Promise<void> {
  const violations = (await axeResults(page, ['wcag2a', 'wcag2aa'])).violations;
  expect(violations.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`), name).toStrictEqual([]);
}

describe.skipIf(browserMissing)('the admin panel in Chromium', () => {
  let app: TestApp;
  let browser: Browser;
  let page: Page;
  let admin: Awaited<ReturnType<typeof makeUser>>;
  beforeAll(async () => {
    app = await startTestApp();
    browser = await sharedBrowser();
    admin = await makeUser(app, { role: 'admin', fullName: 'Ada Admin' });
    page = await (await newContext(browser)).newPage();
    await signIn(page, app, admin);
    expect(new URL(page.url()).pathname, 'back at the admin page after signing in').toBe('/admin');
  });
  afterAll(async () => {
    await releaseBrowser(browser);
    await app?.close();
  });

  const tokenFor = (client: { client_id: string }, secret: string, username: string, localAddress?: string) =>
    app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: secret, username }, { localAddress });

  it('creates a client system and shows its secret once, in the answer to the form; a reload no longer has it and registers nothing', async () => {
    const user = await makeUser(app);
    await page.goto(`${await app.listen()}/admin/clients`);
    await page.getByLabel('Name').fill('Customer CRM');
    await page.getByLabel('Callback URL').fill('https://crm.example/sso/callback');
    await page.getByLabel('Allowed IP addresses').fill('127.0.0.1\n::1');
    const [answer] = await Promise.all([
      page.waitForResponse((r) => new URL(r.url()).pathname === '/admin/clients' && r.request().method() === 'POST'),
      clickAndLoad(page, page.getByRole('button', { name: 'Register client system' })),
    ]);
    expect(await answer.headerValue('cache-control'), 'the page with the secret is never cached').toBe('no-store');
    expect(answer.status(), 'the secret is in the answer itself, not behind a redirect through the session').toBe(200);
    const secretField = page.locator('input[data-secret]');
    const secret = await secretField.inputValue();
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: (await app.listen()) });
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByRole('button', { name: 'Copied' }).waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText()), 'the copy button copies the secret').toBe(secret);
    expect(await page.locator('.secret').innerText()).toMatch(/shown only this once/);
    const clientId = (await page.locator('[data-field="client_id"]').innerText()).trim();
    expect(new URL(page.url()).pathname, 'the history holds the client\'s own address').toBe(`/admin/clients/${clientId}`);
    expect((await tokenFor({ client_id: clientId }, secret, user.username)).status, 'the secret shown works').toBe(200);
    await assertAccessible(page, 'client created');
    await saveScreenshot(page, 'admin-client-created');

    const registered = () => app.db.query("SELECT 1 FROM clients WHERE client_name = 'Customer CRM'").then((r) => r.rowCount);
    const before = await registered();
    await page.reload();
    expect(await page.locator('input[data-secret]').count(), 'gone after a reload').toBe(0);
    expect(!(await page.content()).includes(secret)).toBeTruthy();
    expect(await registered(), 'the reload did not send the form again').toBe(before);
    expect(await page.locator('[data-field="masked-secret"]').innerText()).toBe(`••••••••${secret.slice(-4)}`);
    await page.goto(`${await app.listen()}/admin/clients`);
    expect(!(await page.content()).includes(secret), 'the list shows it masked').toBeTruthy();
    expect(await page.locator(`tr[data-client-id="${clientId}"] .masked`).innerText()).toBe(`••••••••${secret.slice(-4)}`);
    await assertAccessible(page, 'clients');
    await saveScreenshot(page, 'admin-clients');
  });

  it('regenerates a secret after a confirmation; the new one is shown once and the old one fails at once', async () => {
    const user = await makeUser(app);
    const { client, secret: oldSecret } = await app.services.clients.createClient(
      { name: 'Team Wiki', callbackUrl: 'https://wiki.example/cb', allowedIps: ['127.0.0.1'] }, { via: 'cli' });
    await page.goto(`${await app.listen()}/admin/clients/${client.client_id}`);
    await clickAndLoad(page, page.getByRole('link', { name: 'Regenerate secret…' }));
    await page.waitForURL(`**/admin/clients/${client.client_id}/regenerate`);
    expect(await page.getByRole('heading', { level: 1 }).innerText()).toMatch(/Regenerate the secret of Team Wiki\?/);
    expect((await tokenFor(client, oldSecret, user.username)).status, 'nothing changes before the confirmation').toBe(200);
    await saveScreenshot(page, 'admin-client-regenerate');
    await clickAndLoad(page, page.getByRole('button', { name: 'Yes, regenerate the secret' }));
    await page.waitForURL(`**/admin/clients/${client.client_id}`);
    const newSecret = await page.locator('input[data-secret]').inputValue();
    expect(newSecret).not.toBe(oldSecret);
    expect(await page.locator('.secret').innerText()).toMatch(/previous secret no longer works/);
    expect((await tokenFor(client, oldSecret, user.username)).status).toBe(401);
    expect((await tokenFor(client, newSecret, user.username)).status).toBe(200);
    await page.reload();
    expect(await page.locator('input[data-secret]').count()).toBe(0);
    expect((await tokenFor(client, newSecret, user.username)).status, 'the reload regenerated nothing').toBe(200);
  });

  it('edits the allow list: a bad entry is refused by name, a good one is saved and the token endpoint honours it at once', async () => {
    const user = await makeUser(app);
    const { client, secret } = await app.services.clients.createClient(
      { name: 'Payroll', callbackUrl: 'https://payroll.example/cb', allowedIps: ['127.0.0.2'] }, { via: 'cli' });
    expect((await tokenFor(client, secret, user.username, '127.0.0.3')).status).toBe(403);
    await page.goto(`${await app.listen()}/admin/clients/${client.client_id}`);
    const ips = page.locator('#edit-ips');
    await ips.fill('127.0.0.3\n300.1.1.1\nnot-an-ip');
    await clickAndLoad(page, page.getByRole('button', { name: 'Save changes' }));
    expect(await page.getByRole('alert').innerText()).toMatch(/Not an IP address or CIDR range: 300\.1\.1\.1, not-an-ip/);
    expect(await page.locator('#edit-ips').inputValue(), 'what was typed is kept for correcting').toBe('127.0.0.3\n300.1.1.1\nnot-an-ip');
    await saveScreenshot(page, 'admin-client-allowlist-refused');
    expect((await app.services.clients.findClient(client.client_id))?.allowed_ips, 'nothing saved').toStrictEqual(['127.0.0.2']);

    await page.locator('#edit-ips').fill('0.0.0.0/0');
    await clickAndLoad(page, page.getByRole('button', { name: 'Save changes' }));
    expect(await page.getByRole('alert').innerText()).toMatch(/0\.0\.0\.0\/0 admits every address; confirm/);
    expect((await app.services.clients.findClient(client.client_id))?.allowed_ips).toStrictEqual(['127.0.0.2']);

    await page.locator('#edit-ips').fill('127.0.0.3');
    await clickAndLoad(page, page.getByRole('button', { name: 'Save changes' }));
    await page.waitForURL(`**/admin/clients/${client.client_id}`);
    expect(await page.getByRole('status').first().innerText()).toMatch(/was saved/);
    expect(await page.locator('#edit-ips').inputValue()).toBe('127.0.0.3');
    expect((await tokenFor(client, secret, user.username, '127.0.0.3')).status, 'the new address is admitted at once').toBe(200);
    expect((await tokenFor(client, secret, user.username, '127.0.0.2')).status, 'the old one is refused at once').toBe(403);

    await page.locator('#edit-ips').fill('0.0.0.0/0');
    await page.getByLabel(/admits every address, and want to save it anyway/).check();
    await clickAndLoad(page, page.getByRole('button', { name: 'Save changes' }));
    await page.waitForURL(`**/admin/clients/${client.client_id}`);
    expect((await app.services.clients.findClient(client.client_id))?.allowed_ips, 'saved with the confirmation').toStrictEqual(['0.0.0.0/0']);
    await assertAccessible(page, 'client detail');
    await saveScreenshot(page, 'admin-client');

    await clickAndLoad(page, page.getByRole('button', { name: 'Deactivate' }));
    await page.waitForURL(`**/admin/clients/${client.client_id}`);
    expect((await tokenFor(client, secret, user.username, '127.0.0.3')).status, 'deactivated').toBe(401);
    await clickAndLoad(page, page.getByRole('button', { name: 'Reactivate' }));
    await page.waitForURL(`**/admin/clients/${client.client_id}`);
    expect((await tokenFor(client, secret, user.username, '127.0.0.3')).status, 'reactivated').toBe(200);
  });

  it('registers a webhook with event checkboxes and shows its delivery after a login', async () => {
    const receiver = await startReceiver();
    try {
      await page.goto(`${await app.listen()}/admin/webhooks`);
      await page.getByLabel('Receiver URL').fill(receiver.url);
      await page.getByLabel('Signing secret').fill('a-long-signing-secret');
      await page.getByRole('checkbox', { name: /user\.login A user signed in/ }).check();
      await page.getByRole('checkbox', { name: /user\.locked/ }).check();
      await clickAndLoad(page, page.getByRole('button', { name: 'Register webhook' }));
      await page.waitForURL(/\/admin\/webhooks\/\d+$/);
      expect(await page.getByRole('status').first().innerText()).toMatch(/registered/);
      expect(await page.locator('.page-heading').innerText()).toMatch(/user\.login\s+user\.locked/);

      const user = await makeUser(app);
      expect((await app.http.post('/api/auth/login', { login: user.username, password: user.password })).status).toBe(200);
      await receiver.waitFor(() => receiver.of('user.login').some((r) => r.body.data.user_id === user.id));
      // The page shows what is recorded when it loads: wait until the attempt is recorded
      // (the receiver has its request a moment before the dispatcher records the answer).
      const recorded = async () => {
        for (let i = 0; i < 200; i++) {
          const r = await app.db.query<{ status: string }>("SELECT status FROM webhook_deliveries WHERE event = 'user.login' AND (data->>'user_id')::int = $1", [user.id]);
          if (r.rows[0]?.status === 'succeeded') break;
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
      };
      await recorded();
      await page.reload();
      const delivery = page.locator('.delivery').first();
      await delivery.locator('[data-field="delivery-status"]', { hasText: 'succeeded' }).waitFor();
      expect(await delivery.locator('.delivery__event').innerText()).toBe('user.login');
      expect(await delivery.locator('[data-field="status-code"]').first().innerText()).toBe('200');
      await assertAccessible(page, 'webhook');
      await saveScreenshot(page, 'admin-webhook');

      const before = receiver.of('user.login').length;
      await clickAndLoad(page, delivery.getByRole('button', { name: 'Redeliver' }));
      await page.waitForURL(/\/admin\/webhooks\/\d+$/);
      await receiver.waitFor(() => receiver.of('user.login').length > before);
      await recorded(); // the redelivery too (it was pending again until then)

      await page.goto(`${await app.listen()}/admin/webhooks`);
      const card = page.locator('.hook', { hasText: receiver.url });
      expect(await card.locator('[data-field="last-delivery"]').innerText()).toMatch(/user\.login\s+succeeded · 200/);
      await assertAccessible(page, 'webhooks');
      await saveScreenshot(page, 'admin-webhooks');

      await card.getByRole('link').first().click();
      await clickAndLoad(page, page.getByRole('button', { name: 'Disable' }));
      await page.waitForURL(/\/admin\/webhooks\/\d+$/);
      expect(await page.locator('[data-field="webhook-state"]').innerText()).toBe('Disabled');
      await clickAndLoad(page, page.getByRole('button', { name: 'Enable' }));
      await page.waitForURL(/\/admin\/webhooks\/\d+$/);
      expect(await page.locator('[data-field="webhook-state"]').innerText()).toBe('Active');
      await page.getByLabel('Delete with its delivery log').check();
      await clickAndLoad(page, page.getByRole('button', { name: 'Delete' }));
      await page.waitForURL(/\/admin\/webhooks$/);
      expect(await page.locator('.hook', { hasText: receiver.url }).count()).toBe(0);
    } finally {
      await receiver.close();
    }
  });

  it('filters the audit log and offers CSV and NDJSON exports of the filtered view', async () => {
    const victim = await makeUser(app);
    await app.http.post('/api/auth/login', { login: victim.username, password: 'not the password' }, { localAddress: '127.0.0.2' });
    await app.http.post('/api/auth/login', { login: victim.username, password: victim.password });
    await page.goto(`${await app.listen()}/admin/audit`);
    await page.getByLabel('User', { exact: true }).fill(victim.username);
    await page.getByLabel('Outcome').selectOption('failure');
    await clickAndLoad(page, page.getByRole('button', { name: 'Filter' }));
    await page.waitForURL(/\/admin\/audit\?/);
    const rows = page.locator('tbody tr');
    expect(await rows.count(), 'only the failed login of that user').toBe(1);
    expect(await rows.first().innerText()).toMatch(/user\.login\s+failure/);
    expect(await rows.first().innerText()).toMatch(/127\.0\.0\.2/);
    const csvLink = await page.getByRole('link', { name: 'Export CSV' }).getAttribute('href');
    expect(String(csvLink)).toMatch(new RegExp(`user=${victim.username}.*outcome=failure.*format=csv`));
    const csv = await page.request.get(`${await app.listen()}${csvLink}`);
    expect(csv.status()).toBe(200);
    expect((await csv.text()).trim().split('\r\n').length, 'the export holds the filtered rows').toBe(2);
    expect(String(await page.getByRole('link', { name: 'Export NDJSON' }).getAttribute('href'))).toMatch(/format=ndjson/);
    await assertAccessible(page, 'audit');
    await saveScreenshot(page, 'admin-audit');

    await page.getByLabel('Outcome').selectOption('');
    await page.getByLabel('IP address').fill('127.0.0.1');
    await clickAndLoad(page, page.getByRole('button', { name: 'Filter' }));
    await page.waitForURL(/ip=127\.0\.0\.1/);
    expect(await page.locator('tbody tr').first().innerText()).toMatch(/user\.login\s+success/);
  });

  it('manages users: search, create, edit, deactivate, see linked systems', async () => {
    const other = await makeUser(app, { fullName: 'Linus Linked' });
    const { client } = await app.services.clients.createClient({ name: 'Ticketing', callbackUrl: 'https://tickets.example/cb', allowedIps: [] }, { via: 'cli' });
    await app.db.query('INSERT INTO user_client_links (user_id, client_id, external_username, username_key) VALUES ($1, $2, $3, $3)', [other.id, client.client_id, 'linus.t']);
    await page.goto(`${await app.listen()}/admin/users`);
    await page.getByLabel('Search users').fill('Linus Linked');
    await clickAndLoad(page, page.getByRole('button', { name: 'Search' }));
    await page.waitForURL(/q=Linus/);
    expect(await page.locator('tbody tr').count()).toBe(1);
    await assertAccessible(page, 'users');
    await saveScreenshot(page, 'admin-users');
    await clickAndLoad(page, page.getByRole('link', { name: other.username }));
    await page.waitForURL(`**/admin/users/${other.id}`);
    expect(await page.locator(`[data-linked-client="${client.client_id}"]`).innerText()).toMatch(/Ticketing as linus\.t/);
    await assertAccessible(page, 'user');
    await saveScreenshot(page, 'admin-user');
    await page.getByLabel('Full name').fill('Linus Renamed');
    await clickAndLoad(page, page.getByRole('button', { name: 'Save profile' }));
    await page.waitForURL(`**/admin/users/${other.id}`);
    expect(await page.getByRole('heading', { level: 1 }).innerText()).toBe('Linus Renamed');
    await clickAndLoad(page, page.getByRole('button', { name: 'Deactivate' }));
    await page.waitForURL(`**/admin/users/${other.id}`);
    expect(await page.locator('[data-field="active"]').innerText()).toBe('Inactive');

    const name = unique('newbie');
    await page.goto(`${await app.listen()}/admin/users/new`);
    await saveScreenshot(page, 'admin-user-new');
    await page.getByLabel('Username').fill(name);
    await page.getByLabel('Full name').fill('New Person');
    await page.getByLabel('Email').fill('bad-address');
    await page.getByLabel('Initial password').fill('a good password');
    await page.locator('form.form').evaluate((f) => f.setAttribute('novalidate', ''));
    await clickAndLoad(page, page.getByRole('button', { name: 'Create user' }));
    expect(await page.getByRole('alert').innerText()).toMatch(/email is not a valid address/);
    expect(await page.getByLabel('Username').inputValue(), 'kept for correcting').toBe(name);
    await page.getByLabel('Email').fill('new.person@example.com');
    await page.getByLabel('Initial password').fill('a good password');
    await clickAndLoad(page, page.getByRole('button', { name: 'Create user' }));
    await page.waitForURL(/\/admin\/users\/\d+$/);
    expect(await page.getByRole('heading', { level: 1 }).innerText()).toBe('New Person');
    expect((await app.http.post('/api/auth/login', { login: name, password: 'a good password' })).status).toBe(200);
  });

  it('shows the overview with the counts', async () => {
    await page.goto(`${await app.listen()}/admin`);
    expect(await page.getByRole('heading', { level: 1 }).innerText()).toBe('Overview');
    expect(Number(await page.locator('[data-stat="users"]').innerText()) >= 3).toBeTruthy();
    expect(Number(await page.locator('[data-stat="tokens_issued_today"]').innerText()) >= 1).toBeTruthy();
    expect(Number(await page.locator('[data-stat="failed_logins_24h"]').innerText()) >= 1).toBeTruthy();
    await assertAccessible(page, 'overview');
    await saveScreenshot(page, 'admin-overview');
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= 390), 'no sideways scrolling on a phone').toBeTruthy();
    await saveScreenshot(page, 'admin-overview-phone');
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  // two tests of a few axe runs each: seven in one took 25 s on a slow 2-core machine, too near the timeout
  it('reads well in the dark colour scheme (axe-core on the overview, client and user pages)', async () => {
    const dark = await (await newContext(browser, { colorScheme: 'dark' })).newPage();
    await signIn(dark, app, admin);
    const { client } = await app.services.clients.createClient({ name: 'Dark Mode CRM', callbackUrl: 'https://dark.example/cb', allowedIps: ['127.0.0.1'] }, { via: 'cli' });
    for (const [path, name] of [['/admin', 'overview'], ['/admin/clients', 'clients'], [`/admin/clients/${client.client_id}`, 'client'], ['/admin/users', 'users']]) {
      await dark.goto(`${await app.listen()}${path}`);
      await assertAccessible(dark, `${name} (dark)`);
    }
  });

  it('reads well in the dark colour scheme (axe-core on the webhook and audit pages and a shown secret)', async () => {
    const dark = await (await newContext(browser, { colorScheme: 'dark' })).newPage();
    await signIn(dark, app, admin);
    const { client } = await app.services.clients.createClient({ name: 'Dark Mode Wiki', callbackUrl: 'https://dark.example/cb', allowedIps: ['127.0.0.1'] }, { via: 'cli' });
    for (const [path, name] of [['/admin/webhooks', 'webhooks'], ['/admin/audit', 'audit']]) {
      await dark.goto(`${await app.listen()}${path}`);
      await assertAccessible(dark, `${name} (dark)`);
    }
    await dark.goto(`${await app.listen()}/admin/clients/${client.client_id}/regenerate`);
    await clickAndLoad(dark, dark.getByRole('button', { name: 'Yes, regenerate the secret' }));
    await dark.waitForURL(`**/admin/clients/${client.client_id}`);
    await assertAccessible(dark, 'secret shown (dark)');
    await saveScreenshot(dark, 'admin-client-secret-dark');
  });

  it('refuses a non-admin everywhere with a 403 page and shows them no admin link', async () => {
    const member = await makeUser(app);
    const memberPage = await (await newContext(browser)).newPage();
    await signIn(memberPage, app, member, '/dashboard');
    await memberPage.waitForURL(`${await app.listen()}/dashboard`);
    expect(await memberPage.getByRole('link', { name: 'Administration' }).count()).toBe(0);
    const webhook = await app.db.query<{ id: number }>('INSERT INTO webhooks (url, events, secret) VALUES ($1, $2, $3) RETURNING id', ['http://127.0.0.1:9/x', ['user.login'], 'sixteen-chars-secret']);
    for (const path of ['/admin', '/admin/clients', '/admin/clients/x', '/admin/users', '/admin/users/new', `/admin/users/${admin.id}`, '/admin/webhooks', `/admin/webhooks/${webhook.rows[0].id}`, '/admin/audit']) {
      const answer = await memberPage.goto(`${await app.listen()}${path}`);
      expect(answer?.status(), path).toBe(403);
      expect(await memberPage.getByRole('heading', { level: 1 }).innerText(), path).toBe('Not allowed');
    }
    const api = await memberPage.request.get(`${await app.listen()}/api/admin/audit?format=csv`);
    expect(api.status()).toBe(403);
    await saveScreenshot(memberPage, 'admin-refused');
  });
});
