import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate } from 'otplib';
import type { Browser, Page } from 'playwright-core';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { axeResults, browserMissing, clickAndLoad, newContext, recordNavigation, releaseBrowser, saveScreenshot, sharedBrowser } from '../helpers/browser.ts';
import { makeUser } from '../helpers/factories.ts';
import { startTestClient, type TestClient } from './test-client.ts';

/** Fills and submits the first step; returns the answer to the form post. */
async function signIn(page: Page, login: string, password: string) {
  await page.getByLabel('Username').fill(login);
  await page.getByLabel('Password').fill(password);
  const [answer] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST' && new URL(r.url()).pathname === '/sso/login'),
    clickAndLoad(page, page.getByRole('button', { name: 'Sign in', exact: true })),
  ]);
  return answer;
}

async function axeViolations(page: Page) {
  const result = await axeResults(page, ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']);
  return result.violations.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`);
}

describe.skipIf(browserMissing)('browser single sign-on in Chromium', () => {
  let app: TestApp;
  let browser: Browser;
  let wiki: TestClient;
  beforeAll(async () => {
    app = await startTestApp();
    browser = await sharedBrowser();
    wiki = await startTestClient(app, { name: 'Team Wiki' });
  });
  afterAll(async () => {
    await releaseBrowser(browser);
    await wiki?.close();
    await app?.close();
  });

  it('signs in on the login page and lands at the client, whose token validation names the user once', async () => {
    const user = await makeUser(app, { fullName: 'Ada Lovelace' });
    const context = await newContext(browser);
    const page = await context.newPage();
    const opened = await page.goto(wiki.loginUrl({ state: 'abc-123' }));
    expect(opened?.status()).toBe(200);
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Sign in');
    expect((await page.locator('.auth__lead').textContent()) ?? '').toMatch(/to continue to\s+Team Wiki/);
    await saveScreenshot(page, 'login-desktop');

    const answer = await signIn(page, user.username, user.password);
    expect(answer.status()).toBe(303);
    expect(await answer.headerValue('referrer-policy')).toBe('no-referrer');
    await page.waitForURL(`${wiki.origin}/callback?**`);
    expect(await page.locator('#who').textContent()).toBe(`Hello ${user.username}`);

    const visit = wiki.visits.at(-1)!;
    expect(visit.status).toBe(200);
    expect(visit.answer.user).toStrictEqual({ id: user.id, username: user.username, email: user.email, roles: [user.role], full_name: user.full_name });
    expect(visit.state).toBe('abc-123');
    expect(visit.query.app, 'the registered callback query is kept').toBe('test');
    const again = await app.http.post('/api/sso/validate', { client_id: wiki.client_id, client_secret: wiki.client_secret, token: visit.token });
    expect(again.body.error, 'accepted once only').toBe('token_already_used');
    await context.close();
  });

  it('sends a browser that already has a session straight to the client, without the form', async () => {
    const user = await makeUser(app);
    const context = await newContext(browser);
    const page = await context.newPage();
    await page.goto(wiki.loginUrl());
    await signIn(page, user.username, user.password);
    await page.waitForURL(`${wiki.origin}/callback?**`);

    const seen = recordNavigation(page);
    const visitsBefore = wiki.visits.length;
    await page.goto(wiki.loginUrl({ state: 'second' }));
    await page.waitForURL(`${wiki.origin}/callback?**`);
    expect(await page.locator('#who').textContent()).toBe(`Hello ${user.username}`);
    const loginAnswers = seen.filter((s) => new URL(s.url).pathname === '/sso/login').map((s) => s.status);
    expect(loginAnswers, 'the login page answered only with a redirect').toStrictEqual([303]);
    expect(wiki.visits.length).toBe(visitsBefore + 1);
    expect(wiki.visits.at(-1)!.state).toBe('second');
    await context.close();
  });

  it('keeps failures on the page: wrong password 401, locked 423 with the minutes left', async () => {
    const user = await makeUser(app);
    const context = await newContext(browser);
    const page = await context.newPage();
    await page.goto(wiki.loginUrl());
    const wrong = await signIn(page, user.username, 'not the password');
    expect(wrong.status()).toBe(401);
    expect(await page.getByRole('alert').innerText()).toBe('The username or password is incorrect.');
    expect(await page.getByLabel('Username').inputValue()).toBe(user.username);
    expect(await page.getByLabel('Password').inputValue()).toBe('');
    expect(page.url().startsWith((await app.listen()))).toBeTruthy();
    await saveScreenshot(page, 'login-wrong-password');

    for (let i = 1; i < app.config.LOCKOUT_THRESHOLD; i++) {
      await app.http.post('/api/auth/login', { login: user.username, password: `wrong-${i}` });
    }
    const locked = await signIn(page, user.username, user.password);
    expect(locked.status()).toBe(423);
    expect(await page.getByRole('alert').innerText()).toMatch(/locked; try again in 30 minutes/);
    await context.close();
  });

  it('takes a user who must change their password through the change form and on to the client on its own origin', async () => {
    const user = await makeUser(app);
    const temporary = 'temporary but long 2931';
    await app.services.users.setPassword({ id: user.id }, { password: temporary, mustChange: true }, { via: 'cli' });
    const context = await newContext(browser);
    const page = await context.newPage();
    const blocked: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy/.test(m.text())) blocked.push(m.text());
    });
    await page.goto(wiki.loginUrl({ state: 'mc' }));
    await signIn(page, user.username, temporary);
    await page.waitForURL('**/account/password');
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Choose a new password');
    await page.getByLabel('Current password').fill(temporary);
    await page.getByLabel('New password', { exact: true }).fill('four unrelated words here');
    await page.getByLabel('New password again').fill('four unrelated words here');
    // the post, then 303 to /sso/login, then 303 to the client: the form's CSP must allow the last hop
    await page.getByRole('button', { name: 'Change password and continue' }).click();
    await page.waitForURL(`${wiki.origin}/callback?**`);
    expect(blocked, 'no form-action violation').toStrictEqual([]);
    expect(await page.locator('#who').textContent()).toBe(`Hello ${user.username}`);
    expect(wiki.visits.at(-1)!.state).toBe('mc');
    await context.close();
  });

  it('asks a two-factor user for the code in a second step, refuses a wrong one, accepts the right one', async () => {
    const user = await makeUser(app);
    const record = (await app.services.auth.activeUser(user.id))!;
    const ctx = { ipAddress: '127.0.0.1', userAgent: null };
    const { secret } = await app.services.auth.twoFactor.startSetup(record, ctx, { kind: 'session', sid: 'test-setup' });
    await app.services.auth.twoFactor.enable(record, await generate({ secret, epoch: Math.floor(Date.now() / 1000) - 30 }), ctx, { kind: 'session', sid: 'test-setup' });

    const context = await newContext(browser);
    const page = await context.newPage();
    await page.goto(wiki.loginUrl({ state: 'tf' }));
    const step1 = await signIn(page, user.username, user.password);
    expect(step1.status()).toBe(200);
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Two-step verification');
    expect(await page.locator('input[type=password], input[name=password]').count(), 'no password field, hidden or not').toBe(0);
    expect(await axeViolations(page)).toStrictEqual([]);
    await saveScreenshot(page, 'login-two-factor');

    const current = await generate({ secret });
    const submitCode = async (code: string) => {
      await page.getByLabel('Authentication code').fill(code);
      const [answer] = await Promise.all([
        page.waitForResponse((r) => r.request().method() === 'POST' && new URL(r.url()).pathname === '/sso/login'),
        clickAndLoad(page, page.getByRole('button', { name: 'Verify and continue' })),
      ]);
      return answer;
    };
    const wrong = await submitCode(current === '123456' ? '654321' : '123456');
    expect(wrong.status()).toBe(401);
    expect(await page.getByRole('alert').innerText()).toMatch(/That code is not valid/);

    const right = await submitCode(current);
    expect(right.status()).toBe(303);
    await page.waitForURL(`${wiki.origin}/callback?**`);
    expect(await page.locator('#who').textContent()).toBe(`Hello ${user.username}`);
    expect(wiki.visits.at(-1)!.state).toBe('tf');
    await context.close();
  });

  it('never leaves the service for an unknown client_id or an injected redirect target', async () => {
    const user = await makeUser(app);
    const context = await newContext(browser);
    const page = await context.newPage();
    const evil = `${wiki.origin}/evil`;
    const unknown = await page.goto(`${await app.listen()}/sso/login?client_id=${unique('nope')}&redirect_uri=${encodeURIComponent(evil)}`);
    expect(unknown?.status()).toBe(400);
    expect(page.url().startsWith(`${await app.listen()}/sso/login`)).toBeTruthy();
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('This link does not work');
    await saveScreenshot(page, 'login-unknown-client');

    const injected = { redirect_uri: evil, redirect_url: evil, callback_url: evil, return_to: evil, next: evil };
    await page.goto(wiki.loginUrl(injected));
    await signIn(page, user.username, user.password);
    await page.waitForURL(`${wiki.origin}/callback?**`);
    const landed = new URL(page.url());
    expect(landed.pathname).toBe('/callback');
    expect([...landed.searchParams.keys()].sort()).toStrictEqual(['app', 'token']);
    await context.close();
  });

  it('passes a basic accessibility check: labels, one heading, keyboard order, axe-core', async () => {
    const context = await newContext(browser);
    const page = await context.newPage();
    await page.goto(wiki.loginUrl());
    expect(await axeViolations(page)).toStrictEqual([]);
    expect(await page.getByRole('heading', { level: 1 }).count()).toBe(1);
    expect(await page.getByLabel('Username').getAttribute('autocomplete')).toBe('username webauthn');
    expect(await page.getByLabel('Password').getAttribute('autocomplete')).toBe('current-password');

    // keyboard: the username field has the focus on arrival; Tab walks username, password, button,
    // and Shift+Tab back from the username reaches the skip link first
    const focused = () => page.evaluate(() => {
      const el = document.activeElement as HTMLElement | null;
      return el?.id || el?.textContent?.trim() || el?.tagName || '';
    });
    const order = [await focused()];
    for (let i = 0; i < 2; i++) {
      await page.keyboard.press('Tab');
      order.push(await focused());
    }
    expect(order).toStrictEqual(['login', 'password', 'Sign in']);
    await page.getByLabel('Username').focus();
    await page.keyboard.press('Shift+Tab');
    expect(await focused()).toBe('Skip to content');

    const wrong = await signIn(page, unique('ghost'), 'whatever-it-is');
    expect(wrong.status()).toBe(401);
    expect(await axeViolations(page), 'the page with its error message too').toStrictEqual([]);
    await context.close();
  });

  it('fits a phone screen (390 px) without sideways scrolling, and passes axe in the dark scheme there', async () => {
    const context = await newContext(browser, { width: 390, height: 844, mobile: true, colorScheme: 'dark' });
    const page = await context.newPage();
    await page.goto(wiki.loginUrl());
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    expect(width <= 390, `page is ${width} px wide`).toBeTruthy();
    const button = await page.getByRole('button', { name: 'Sign in', exact: true }).boundingBox();
    expect(button && button.height >= 40, 'a finger-sized button').toBeTruthy();
    expect(await axeViolations(page)).toStrictEqual([]);
    await saveScreenshot(page, 'login-phone-dark');
    await page.emulateMedia({ colorScheme: 'light' });
    await saveScreenshot(page, 'login-phone');
    await context.close();
  });
});
