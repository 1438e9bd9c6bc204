import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { unique } from '../helpers/app.ts';
import { browserMissing, releaseBrowser, sharedBrowser } from '../helpers/browser.ts';
import { makeUser } from '../helpers/factories.ts';
import { addPasskey, passkeySignIn, passwordSignIn, personWithAuthenticator, signOut, startPasskeyApp } from '../pages/passkey-support.ts';

const CLI = { via: 'cli' as const, username: 'test' };

/** A client's access rule holds for a passkey sign-in as for a password (docs/access.md). */
describe.skipIf(browserMissing)('who may use which client system, signing in with a passkey', () => {
  let app: TestApp;
  let base: string;
  let browser: Browser;
  let clientId: string;
  beforeAll(async () => {
    ({ app, base } = await startPasskeyApp());
    browser = await sharedBrowser();
    const group = unique('finance-');
    await app.services.access.createGroup(group, CLI);
    const { client } = await app.services.clients.createClient({ name: 'Billing', callbackUrl: 'http://127.0.0.1:9/callback', allowedIps: ['127.0.0.1'], allowGroups: [group] }, CLI);
    clientId = client.client_id;
  });
  afterAll(async () => {
    await releaseBrowser(browser);
    await app?.close();
  });

  it('refuses a user the rule does not admit: the no-access page, no session, audited, no user.login', async () => {
    const user = await makeUser(app);
    const person = await personWithAuthenticator(browser);
    await passwordSignIn(person.page, base, user);
    await addPasskey(person.page, base, user.password, 'Laptop');
    await signOut(person.page, base);
    const mark = (await app.db.query<{ id: string }>('SELECT coalesce(max(id), 0)::text AS id FROM audit_log')).rows[0].id;

    await passkeySignIn(person.page, `${base}/sso/login?client_id=${encodeURIComponent(clientId)}`);
    expect(await person.page.getByRole('heading', { level: 1 }).textContent()).toBe('You do not have access to Billing');
    expect(new URL(person.page.url()).origin).toBe(base);
    const after = await app.db.query<{ action: string; outcome: string; details: Record<string, unknown> }>(
      'SELECT action, outcome, details FROM audit_log WHERE user_id = $1 AND id > $2 ORDER BY id', [user.id, mark]);
    const logins = after.rows.filter((r) => r.action === 'user.login');
    expect(logins.map((r) => [r.outcome, r.details.reason, r.details.method])).toStrictEqual([['failure', 'access_denied', 'passkey']]);
    // not signed in: the dashboard sends the browser to the sign-in page
    await person.page.goto(`${base}/dashboard`);
    expect(new URL(person.page.url()).pathname).toBe('/login');
    await person.context.close();
  });
});
