import { expect } from 'vitest';
import type { Browser, BrowserContext, CDPSession, Page } from 'playwright-core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { clickAndLoad, newContext } from '../helpers/browser.ts';
import { freePort } from '../helpers/http.ts';
import { signIn, totpCode } from '../auth/support.ts';

/**
 * A test app reached as http://localhost:PORT with PUBLIC_URL naming exactly that: the
 * passkeys' RP ID is `localhost` and their origin the page's, and localhost is a secure
 * context, where Chromium runs WebAuthn.
 */
export async function startPasskeyApp(env: Record<string, string> = {}): Promise<{ app: TestApp; base: string }> {
  const port = await freePort();
  const base = `http://localhost:${port}`;
  const app = await startTestApp({ PUBLIC_URL: base, ...env });
  await app.listen(port);
  return { app, base };
}

/** One person's browser with a platform authenticator (DevTools' virtual one: resident keys, user verification). */
export interface Person {
  context: BrowserContext;
  page: Page;
  cdp: CDPSession;
  authenticatorId: string;
}

/**
 * A fresh browser profile with Chromium's virtual authenticator attached to its page. The
 * virtual authenticator answers a conditional (autofill) request at once, as no person would
 * before choosing the passkey in the username field's suggestions: unless `autofill`, the
 * page is told conditional mediation is unavailable, so only the button signs in.
 */
export async function personWithAuthenticator(
  browser: Browser, size: { width?: number; height?: number; mobile?: boolean } = {}, options: { autofill?: boolean } = {},
): Promise<Person> {
  const context = await newContext(browser, size);
  if (!options.autofill) {
    await context.addInitScript(() => {
      if (window.PublicKeyCredential) window.PublicKeyCredential.isConditionalMediationAvailable = async () => false;
    });
  }
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable', { enableUI: false });
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: {
      protocol: 'ctap2', ctap2Version: 'ctap2_1', transport: 'internal',
      hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true,
    },
  });
  return { context, page, cdp, authenticatorId };
}

/** The credentials the virtual authenticator holds (a removed passkey stays there: the server forgot it). */
export async function authenticatorCredentials(person: Person): Promise<unknown[]> {
  const { credentials } = await person.cdp.send('WebAuthn.getCredentials', { authenticatorId: person.authenticatorId });
  return credentials;
}

/** Signs in with username and password on this service's /login page (first step). */
export async function passwordSignIn(page: Page, base: string, user: { username: string; password: string }): Promise<void> {
  await page.goto(`${base}/login`);
  await page.getByLabel('Username').fill(user.username);
  await page.getByLabel('Password').fill(user.password);
  await clickAndLoad(page, page.getByRole('button', { name: 'Sign in', exact: true }));
  expect(new URL(page.url()).pathname).toBe('/dashboard');
}

/** Adds a passkey named `name` on the security page (signed in already); waits for the page to list it. */
export async function addPasskey(page: Page, base: string, password: string, name: string): Promise<void> {
  await page.goto(`${base}/account/security`);
  const form = page.locator('[data-passkey-register]');
  await expect.poll(() => form.isVisible(), { timeout: 20_000 }).toBe(true);
  await form.getByLabel('Name for this passkey').fill(name);
  await form.getByLabel('Current password, to add a passkey').fill(password);
  await form.getByRole('button', { name: 'Add a passkey' }).click();
  await page.locator('[data-field="passkey-name"]', { hasText: name }).waitFor({ timeout: 30_000 });
}

/** Signs out in the browser. */
export async function signOut(page: Page, base: string): Promise<void> {
  await page.goto(`${base}/sso/logout`);
  await page.getByRole('heading', { name: /signed out/i }).waitFor();
}

/**
 * Opens `url` (a sign-in page) and presses "Sign in with a passkey"; resolves once the browser
 * has left for another document (the callback, or the sign-in page again with the refusal).
 */
export async function passkeySignIn(page: Page, url: string): Promise<void> {
  await page.goto(url);
  const button = page.getByRole('button', { name: 'Sign in with a passkey' });
  await button.waitFor({ timeout: 20_000 });
  await clickAndLoad(page, button);
}

/** Two-step verification on for a user who has none yet (over the API); returns the secret. */
export async function turnOnTotp(app: TestApp, user: { username: string; password: string }): Promise<string> {
  const { cookie } = await signIn(app, user.username, user.password);
  const headers = { cookie: cookie! };
  const setup = await app.http.post('/api/user/2fa/setup', undefined, { headers });
  expect(setup.status, setup.text).toBe(200);
  const enabled = await app.http.post('/api/user/2fa/enable', { code: await totpCode(setup.body.secret, -1), current_password: user.password }, { headers });
  expect(enabled.status, enabled.text).toBe(200);
  return setup.body.secret as string;
}
