import { describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { type TestApp } from '../helpers/app.ts';
import { browserMissing, newContext } from '../helpers/browser.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { browserSuite, signInPage } from '../pages/browser-support.ts';
import { logoUrlProblem } from '../../src/validation/logo-url.ts';

/**
 * docs/clients-as-code.md: the clients table is written by hand (seed files, psql) as well as by
 * the service, and "reading is defensive anyway". Client logos are only a path under /assets or
 * a base64 data: image (docs/pages-for-people.md), but the database bounds their length only. A
 * logo written in SQL as a same-origin address the service itself refuses (here /sso/logout,
 * which the CSP's img-src 'self' lets through) was fetched with the session cookie by every
 * browser that opened the sign-in page: the session holding the form's CSRF token was ended,
 * and nobody could sign in to that client system. The page now leaves such a logo out (found
 * by a review helper).
 */
describe.skipIf(browserMissing)('a client logo written in SQL (Chromium)', () => {
  let app: TestApp;
  let url: string;
  let browser: Browser;
  browserSuite((suite) => ({ app, url, browser } = suite));

  it('is not rendered when the service would refuse it, and the sign-in works', async () => {
    const client = await makeClient(app);
    const logo = '/sso/logout';
    expect(logoUrlProblem(logo), 'the service itself refuses this logo').not.toBe(null);
    // the database refuses it (clients_logo_url_valid, migration 0016); its check is switched
    // off here, as a superuser could, for a row written before that check or around it
    await app.db.exec('ALTER TABLE clients DROP CONSTRAINT IF EXISTS clients_logo_url_valid');
    await app.db.query('UPDATE clients SET logo_url = $1 WHERE client_id = $2', [logo, client.client_id]);
    const html = (await app.http.get(`/sso/login?client_id=${client.client_id}`)).text;
    expect(html).not.toContain('data-client-logo');
    await app.db.query("UPDATE clients SET logo_url = '/assets/favicon.svg' WHERE client_id = $1", [client.client_id]);
    expect((await app.http.get(`/sso/login?client_id=${client.client_id}`)).text, 'a logo it accepts is shown').toContain('data-client-logo');
    await app.db.query('UPDATE clients SET logo_url = $1 WHERE client_id = $2', [logo, client.client_id]);

    const user = await makeUser(app);
    const page = await (await newContext(browser)).newPage();
    // the client's callback host does not exist: answer it here, only the redirect matters
    await page.route('https://client.example/**', (route) => route.fulfill({ status: 200, contentType: 'text/html', body: '<title>client</title>signed in' }));
    await page.goto(`${url}/sso/login?client_id=${client.client_id}`);
    await page.waitForLoadState('load'); // the page's images were fetched
    const answer = await signInPage(page, url, user.username, user.password, `/sso/login?client_id=${client.client_id}`);
    expect(answer.status(), `the sign-in form answered ${answer.status()} instead of the redirect to the client`).toBe(303);
  });
});
