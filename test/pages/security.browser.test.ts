import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { browserMissing, clickAndLoad, newContext, releaseBrowser, saveScreenshot, sharedBrowser } from '../helpers/browser.ts';
import { makeUser } from '../helpers/factories.ts';
import { auditRows, deliveries, subscribe, totpCode } from '../auth/support.ts';
import { alertText, expectAccessible, signInPage } from './browser-support.ts';

/** The field's error message, read through its aria-describedby, when it is marked invalid. */
async function fieldProblem(page: Page, selector: string): Promise<string | null> {
  return page.locator(selector).evaluate((el) => {
    if (el.getAttribute('aria-invalid') !== 'true') return null;
    const ids = (el.getAttribute('aria-describedby') ?? '').split(/\s+/).filter(Boolean);
    return ids.map((id) => document.getElementById(id)?.textContent?.trim() ?? '').join(' ');
  });
}

// a browser on a busy two-core machine: generous bounds (nothing here measures speed)
describe.skipIf(browserMissing)('account security page in Chromium', () => {
  let app: TestApp;
  let url: string;
  let browser: Browser;
  let webhookId: number;
  beforeAll(async () => {
    app = await startTestApp();
    url = await app.listen();
    browser = await sharedBrowser();
    webhookId = await subscribe(app, ['user.2fa_enabled']);
  });
  afterAll(async () => {
    await releaseBrowser(browser);
    await app?.close();
  });

  it('turns two-step verification on from the dashboard with the QR secret and a code; the next sign-in asks for a code', async () => {
    const user = await makeUser(app);
    const page = await (await newContext(browser)).newPage();
    await signInPage(page, url, user.username, user.password);
    expect(new URL(page.url()).pathname).toBe('/dashboard');
    expect(await page.locator('[data-field="dashboard-totp"]').innerText()).toMatch(/Two-step verification is off/);
    await clickAndLoad(page, page.getByRole('link', { name: 'Manage account security' }));
    await page.waitForURL('**/account/security');
    expect(await page.title()).toMatch(/^Account security · /);
    await expectAccessible(page, 'security, off');
    await saveScreenshot(page, 'security-off');

    await clickAndLoad(page, page.getByRole('button', { name: 'Set up two-step verification' }));
    await page.waitForURL('**/account/security#setup');
    const qr = page.getByRole('img', { name: /QR code for setting up two-step verification/ });
    expect(await qr.getAttribute('src'), 'drawn here, not fetched from another site').toMatch(/^data:image\/svg\+xml;base64,/);
    expect(await qr.evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth > 0), 'the QR code renders').toBe(true);
    const secret = (await page.locator('[data-field="totp-secret"]').innerText()).replace(/\s+/g, '');
    expect(secret).toMatch(/^[A-Z2-7]{16,}$/);
    await expectAccessible(page, 'security, setup');
    await saveScreenshot(page, 'security-setup');

    // a wrong password: turning it on asks for the password again (a borrowed session must not lock the owner out)
    await page.getByLabel('Your current password').fill('not the password at all');
    await page.getByLabel('Enter the 6-digit code the app shows').fill(await totpCode(secret));
    await clickAndLoad(page, page.getByRole('button', { name: 'Turn on two-step verification' }));
    expect(await fieldProblem(page, '#enable-password')).toBe('The current password is wrong.');
    expect(await page.locator('[data-field="totp-state"]').innerText()).not.toBe('On');
    await expectAccessible(page, 'security, wrong password');

    // a wrong code: the field is marked, its message under it, the banner as summary
    await page.getByLabel('Your current password').fill(user.password);
    await page.getByLabel('Enter the 6-digit code the app shows').fill('000000');
    await clickAndLoad(page, page.getByRole('button', { name: 'Turn on two-step verification' }));
    expect(await fieldProblem(page, '#enable-code')).toMatch(/That code is not valid/);
    expect(await alertText(page)).toMatch(/That code is not valid/);
    expect(await page.locator('[data-field="totp-secret"]').innerText(), 'the same key is still shown').toMatch(new RegExp(secret.slice(0, 4)));
    await expectAccessible(page, 'security, wrong code');
    await saveScreenshot(page, 'security-setup-wrong-code');

    const firstCode = await totpCode(secret);
    await page.getByLabel('Your current password').fill(user.password);
    await page.getByLabel('Enter the 6-digit code the app shows').fill(firstCode);
    await clickAndLoad(page, page.getByRole('button', { name: 'Turn on two-step verification' }));
    await page.waitForURL('**/account/security#recovery-codes');
    const codes = await page.locator('[data-recovery-codes] li code').allInnerTexts();
    expect(codes.length).toBe(10);
    expect(await page.locator('[data-field="totp-state"]').innerText()).toBe('On');
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Download as text' }).click()]);
    expect(download.suggestedFilename()).toBe('recovery-codes.txt');
    const saved = await new Promise<string>((resolve, reject) => {
      download.createReadStream().then((stream) => {
        let text = '';
        stream.on('data', (c) => { text += c; });
        stream.on('end', () => resolve(text));
        stream.on('error', reject);
      }, reject);
    });
    for (const c of codes) expect(saved).toContain(c);
    expect(await page.getByRole('button', { name: 'Print' }).isVisible()).toBe(true);
    await expectAccessible(page, 'security, recovery codes');
    await saveScreenshot(page, 'security-recovery-codes');
    await page.reload();
    expect(await page.locator('[data-recovery-codes]').count(), 'the codes are shown once').toBe(0);

    const actions = (await auditRows(app, user.username)).map((r) => r.action);
    expect(actions).toEqual(expect.arrayContaining(['user.2fa_setup', 'user.2fa_enable']));
    const sent = (await deliveries(app, webhookId, 'user.2fa_enabled')).filter((d) => d.user_id === user.id);
    expect(sent).toStrictEqual([{ user_id: user.id, email: user.email }]);

    // the next sign-in, in a fresh browser, asks for the code
    const later = await (await newContext(browser)).newPage();
    await signInPage(later, url, user.username, user.password);
    expect(await later.getByRole('heading', { level: 1 }).innerText()).toBe('Two-step verification');
    const code = await totpCode(secret, 1);
    await later.getByLabel('Authentication code').fill(code);
    await clickAndLoad(later, later.getByRole('button', { name: 'Verify and continue' }));
    await later.waitForURL('**/dashboard');
    expect(await later.locator('[data-field="dashboard-totp"]').innerText()).toMatch(/Two-step verification is on/);

    // the same code again at another sign-in: told to wait for the next one
    const third = await (await newContext(browser)).newPage();
    await signInPage(third, url, user.username, user.password);
    await third.getByLabel('Authentication code').fill(code);
    const [reused] = await Promise.all([
      third.waitForResponse((r) => r.request().method() === 'POST'),
      clickAndLoad(third, third.getByRole('button', { name: 'Verify and continue' })),
    ]);
    expect(reused.status()).toBe(401);
    expect(await alertText(third)).toMatch(/already used to sign in\. Wait for the next code/);
    await saveScreenshot(third, 'login-code-reused');
  });

  it('makes new recovery codes with a recovery code, refuses the old ones, and turns two-step verification off with a recovery code', async () => {
    const user = await makeUser(app);
    const page = await (await newContext(browser)).newPage();
    await signInPage(page, url, user.username, user.password);
    await page.goto(`${url}/account/security`);
    await clickAndLoad(page, page.getByRole('button', { name: 'Set up two-step verification' }));
    await page.waitForURL('**/account/security#setup');
    const secret = (await page.locator('[data-field="totp-secret"]').innerText()).replace(/\s+/g, '');
    await page.getByLabel('Your current password').fill(user.password);
    await page.getByLabel('Enter the 6-digit code the app shows').fill(await totpCode(secret));
    await clickAndLoad(page, page.getByRole('button', { name: 'Turn on two-step verification' }));
    await page.waitForURL('**/account/security#recovery-codes');
    const oldCodes = await page.locator('[data-recovery-codes] li code').allInnerTexts();

    await page.locator('#recovery-code').fill(oldCodes[0]);
    await clickAndLoad(page, page.getByRole('button', { name: 'Make new recovery codes' }));
    await page.waitForURL('**/account/security#recovery-codes');
    const newCodes = await page.locator('[data-recovery-codes] li code').allInnerTexts();
    expect(newCodes.length).toBe(10);
    expect(newCodes.filter((c) => oldCodes.includes(c))).toStrictEqual([]);
    expect(await page.locator('[data-recovery-codes]').innerText()).toMatch(/previous codes no longer work/);

    await page.locator('#disable-code').fill(oldCodes[1]);
    await clickAndLoad(page, page.getByRole('button', { name: 'Turn off' }));
    expect(await fieldProblem(page, '#disable-code'), 'an old code no longer works').toMatch(/not valid/);
    expect(await page.locator('[data-field="totp-state"]').innerText()).toBe('On');
    await expectAccessible(page, 'security, refused turn-off');
    await saveScreenshot(page, 'security-disable-refused');

    await page.locator('#disable-code').fill(newCodes[3]);
    await clickAndLoad(page, page.getByRole('button', { name: 'Turn off' }));
    await page.waitForURL('**/account/security');
    expect(await page.locator('[data-field="totp-state"]').innerText()).toBe('Off');
    const audit = await auditRows(app, user.username);
    expect(audit.filter((r) => r.action === 'user.2fa_recovery_codes').map((r) => r.details.with)).toStrictEqual(['recovery']);
    expect(audit.filter((r) => r.action === 'user.2fa_disable' && r.outcome === 'success').map((r) => r.details.with)).toStrictEqual(['recovery']);
    expect(audit.filter((r) => r.action === 'user.2fa_disable' && r.outcome === 'failure').map((r) => r.details.reason), 'the refused old code').toStrictEqual(['invalid_totp']);

    const again = await (await newContext(browser)).newPage();
    await signInPage(again, url, user.username, user.password);
    expect(new URL(again.url()).pathname, 'no code asked once it is off').toBe('/dashboard');
  });

  it('turns two-step verification off with a code from the app', async () => {
    const user = await makeUser(app);
    const { secret } = await app.services.auth.twoFactor.startSetup(user, { ipAddress: '127.0.0.1', userAgent: null }, { kind: 'session', sid: 'test-setup' });
    // three codes of three steps (the server accepts one step either side): enable, sign in, turn off
    await app.services.auth.twoFactor.enable(user, await totpCode(secret, -1), { ipAddress: '127.0.0.1', userAgent: null }, { kind: 'session', sid: 'test-setup' });
    const page = await (await newContext(browser)).newPage();
    await signInPage(page, url, user.username, user.password, '/login?next=/account/security');
    await page.getByLabel('Authentication code').fill(await totpCode(secret));
    await clickAndLoad(page, page.getByRole('button', { name: 'Verify and continue' }));
    await page.waitForURL('**/account/security');
    await expectAccessible(page, 'security, on');
    await saveScreenshot(page, 'security-on');
    await page.locator('#disable-code').fill(await totpCode(secret, 1));
    await clickAndLoad(page, page.getByRole('button', { name: 'Turn off' }));
    await page.waitForURL('**/account/security');
    expect(await page.locator('[data-field="totp-state"]').innerText()).toBe('Off');
    expect(await page.getByRole('status').first().innerText()).toMatch(/Two-step verification is off/);
  });

  it('links to the password and sessions pages from its "Password and sessions" part', async () => {
    const user = await makeUser(app);
    const page = await (await newContext(browser)).newPage();
    await signInPage(page, url, user.username, user.password, '/login?next=/account/security');
    const part = page.getByRole('region', { name: 'Password and sessions' });
    expect(await part.getByRole('link', { name: 'Change your password' }).getAttribute('href')).toBe('/account/password');
    expect(await part.getByRole('link', { name: 'Sign out everywhere' }).getAttribute('href')).toBe('/account/sessions');
  });
});
