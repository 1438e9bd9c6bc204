import { describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { type TestApp, unique } from '../helpers/app.ts';
import { browserMissing, newContext, saveScreenshot } from '../helpers/browser.ts';
import { makeUser } from '../helpers/factories.ts';
import { alertText, browserSuite, expectAccessible, signInPage } from './browser-support.ts';

// a browser on a busy two-core machine: generous bounds (nothing here measures speed)
describe.skipIf(browserMissing)('sign-in messages that tell the truth, in Chromium', () => {
  let app: TestApp;
  let url: string;
  let browser: Browser;
  browserSuite((suite) => ({ app, url, browser } = suite));

  /** The banner after each of five wrong passwords for `login`, with the status of each answer. */
  async function fiveWrong(login: string): Promise<Array<{ status: number; text: string }>> {
    const page = await (await newContext(browser)).newPage();
    await page.goto(`${url}/login`);
    const seen: Array<{ status: number; text: string }> = [];
    for (let i = 1; i <= 5; i++) {
      const answer = await signInPage(page, url, login, `wrong password ${i}`, '');
      seen.push({ status: answer.status(), text: await alertText(page) });
      if (i === 4) await saveScreenshot(page, 'login-one-try-left');
      if (i === 5) {
        await expectAccessible(page, 'login, locked now');
        await saveScreenshot(page, 'login-locked-now');
      }
    }
    await page.context().close();
    return seen;
  }

  it('warns on the fourth wrong password that one try is left, and the fifth shows the lock and how long it lasts', async () => {
    const user = await makeUser(app);
    const seen = await fiveWrong(user.username);
    expect(seen.map((s) => s.status)).toStrictEqual([401, 401, 401, 401, 401]);
    for (const s of seen.slice(0, 3)) expect(s.text).toBe('The username or password is incorrect.');
    expect(seen[3].text).toBe('The username or password is incorrect. One more failed attempt locks the account for 30 minutes.');
    expect(seen[4].text).toBe('The username or password is incorrect. Too many failed attempts: this account is now locked for 30 minutes.');

    // the right password during the lock: still locked, with the minutes left
    const page = await (await newContext(browser)).newPage();
    const answer = await signInPage(page, url, user.username, user.password);
    expect(answer.status()).toBe(423);
    expect(await alertText(page)).toMatch(/This account is locked; try again in 30 minutes\./);
  });

  it('says exactly the same for a name nobody has (its counter runs too)', async () => {
    const user = await makeUser(app);
    const known = await fiveWrong(user.username);
    const unknown = await fiveWrong(unique('nobody'));
    expect(unknown).toStrictEqual(known);
  });
});
