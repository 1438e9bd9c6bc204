import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { browserMissing, clickAndLoad, releaseBrowser, saying, sharedBrowser } from '../helpers/browser.ts';
import { makeUser } from '../helpers/factories.ts';
import { expectAccessible, PHONE } from './browser-support.ts';
import {
  addPasskey, authenticatorCredentials, passkeySignIn, passwordSignIn, type Person, personWithAuthenticator, signOut, startPasskeyApp, turnOnTotp,
} from './passkey-support.ts';
import { startTestClient, type TestClient } from './test-client.ts';

/**
 * Passkeys end to end in Chromium with its virtual authenticator (DevTools' WebAuthn domain:
 * CTAP2, internal transport, resident keys, user verification): added on the security page,
 * then used on a client system's sign-in page without a username, arriving at the client's
 * callback with a token that /api/sso/validate accepts for that user.
 */
describe.skipIf(browserMissing)('passkeys in the browser', () => {
  let app: TestApp;
  let base: string;
  let browser: Browser;
  let client: TestClient;
  beforeAll(async () => {
    ({ app, base } = await startPasskeyApp());
    browser = await sharedBrowser();
    client = await startTestClient(app, { name: 'Passkey Shop' });
  });
  afterAll(async () => {
    await releaseBrowser(browser);
    await client?.close();
    await app?.close();
  });

  const clientLogin = () => `${base}/sso/login?client_id=${encodeURIComponent(client.client_id)}`;
  const lastVisit = () => client.visits.at(-1);
  const audit = async (userId: number) => (await app.db.query<{ action: string; outcome: string; details: any }>(
    'SELECT action, outcome, details FROM audit_log WHERE user_id = $1 ORDER BY id', [userId])).rows
    .map((r) => ({ ...r, details: typeof r.details === 'string' ? JSON.parse(r.details) : r.details }));

  /** A user with a passkey added in their own browser, then signed out. */
  async function userWithPasskey(name = 'Laptop'): Promise<{ user: Awaited<ReturnType<typeof makeUser>>; person: Person }> {
    const user = await makeUser(app);
    const person = await personWithAuthenticator(browser);
    await passwordSignIn(person.page, base, user);
    await addPasskey(person.page, base, user.password, name);
    await signOut(person.page, base);
    return { user, person };
  }

  /** Adds a second passkey for `user` in `person`'s browser (its own authenticator), then signs out. */
  async function userWithPasskeyOn(person: Person, user: { username: string; password: string }): Promise<void> {
    await passwordSignIn(person.page, base, user);
    await addPasskey(person.page, base, user.password, 'Autofill device');
    await signOut(person.page, base);
  }

  it('adds a passkey, signs out, and signs in with it at a client system without a username', async () => {
    const { user, person } = await userWithPasskey('Work laptop');
    expect(await authenticatorCredentials(person), 'a discoverable credential on the authenticator').toHaveLength(1);
    const before = client.visits.length;
    await passkeySignIn(person.page, clientLogin());
    await person.page.waitForURL(`${client.origin}/callback**`, { timeout: 30_000 });
    expect(client.visits.length).toBe(before + 1);
    const visit = lastVisit()!;
    expect(visit.status, JSON.stringify(visit.answer)).toBe(200);
    expect(visit.answer.valid).toBe(true);
    expect(visit.answer.user.username).toBe(user.username);
    const rows = await audit(user.id);
    expect(rows.some((r) => r.action === 'passkey.added' && r.details.name === 'Work laptop')).toBe(true);
    const login = rows.filter((r) => r.action === 'user.login' && r.outcome === 'success').at(-1);
    expect(login?.details).toMatchObject({ via: 'page', method: 'passkey', two_factor: true });
    const used = await app.db.query<{ last_used_at: Date | null }>('SELECT last_used_at FROM passkeys WHERE user_id = $1', [user.id]);
    expect(used.rows[0].last_used_at).not.toBeNull();
  });

  it('offers the passkey in the username field\'s autofill (conditional mediation), which signs in the same way', async () => {
    const user = await makeUser(app);
    const person = await personWithAuthenticator(browser, {}, { autofill: true });
    await userWithPasskeyOn(person, user);
    const page = await app.http.get(`/sso/login?client_id=${encodeURIComponent(client.client_id)}`);
    expect(page.text).toContain('autocomplete="username webauthn"');
    // no button pressed: the virtual authenticator answers the autofill request as a person choosing the passkey would
    await Promise.all([
      person.page.waitForURL(`${client.origin}/callback**`, { timeout: 30_000 }),
      person.page.goto(clientLogin()).catch(() => undefined),
    ]);
    expect(lastVisit()!.answer.user?.username).toBe(user.username);
  });

  it('signs a user with two-step verification in without asking for a code', async () => {
    const { user, person } = await userWithPasskey();
    await turnOnTotp(app, user);
    await passkeySignIn(person.page, clientLogin());
    await person.page.waitForURL(`${client.origin}/callback**`, { timeout: 30_000 });
    expect(lastVisit()!.answer.user?.username).toBe(user.username);
  });

  it('refuses a locked account and an inactive one', async () => {
    const { user, person } = await userWithPasskey();
    await app.db.query("INSERT INTO login_attempts (login, failed_count, locked_until) VALUES ($1, 5, now() + interval '30 minutes')", [user.username]);
    await passkeySignIn(person.page, clientLogin());
    expect(new URL(person.page.url()).pathname).toBe('/sso/login');
    await expect.poll(() => person.page.locator('.flash, [role="alert"]').first().textContent()).toMatch(/locked/i);

    await app.db.query('DELETE FROM login_attempts WHERE login = $1', [user.username]);
    await app.db.query('UPDATE users SET active = false WHERE id = $1', [user.id]);
    await passkeySignIn(person.page, clientLogin());
    expect(new URL(person.page.url()).pathname).toBe('/sso/login');
    await expect.poll(() => person.page.locator('.flash, [role="alert"]').first().textContent()).toMatch(/passkey could not be used/i);
    const refusals = (await audit(user.id)).filter((r) => r.action === 'user.login' && r.outcome === 'failure').map((r) => r.details.reason);
    expect(refusals).toStrictEqual(['account_locked', 'user_inactive']);
  });

  it('refuses a passkey after it was removed on the security page, and one whose counter went backwards', async () => {
    const { user, person } = await userWithPasskey('Old phone');
    await app.db.query('UPDATE passkeys SET counter = 100000 WHERE user_id = $1', [user.id]);
    await passkeySignIn(person.page, clientLogin());
    expect(new URL(person.page.url()).pathname).toBe('/sso/login');
    expect((await audit(user.id)).at(-1)?.details).toMatchObject({ reason: 'invalid_passkey' });

    await app.db.query('UPDATE passkeys SET counter = 0 WHERE user_id = $1', [user.id]);
    await passwordSignIn(person.page, base, user);
    await person.page.goto(`${base}/account/security`);
    await clickAndLoad(person.page, person.page.getByRole('button', { name: 'Remove passkey Old phone' }));
    await saying(person.page, 'after the removal', person.page.locator('[data-field="no-passkeys"]').waitFor());
    expect((await audit(user.id)).some((r) => r.action === 'passkey.removed' && r.details.name === 'Old phone')).toBe(true);
    await signOut(person.page, base);
    await passkeySignIn(person.page, clientLogin());
    expect(new URL(person.page.url()).pathname).toBe('/sso/login');
    await expect.poll(() => person.page.locator('.flash, [role="alert"]').first().textContent()).toMatch(/passkey could not be used/i);
  });

  it('refuses an assertion sent twice (its challenge is spent) and one checked against another origin', async () => {
    const { user, person } = await userWithPasskey();
    await person.page.goto(`${base}/login`);
    // an assertion as the sign-in page's script gets it, kept instead of posted
    const assertion = () => person.page.evaluate(async () => {
      const answer = await fetch('/api/passkeys/authentication/options', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      const lib = (window as unknown as { SimpleWebAuthnBrowser: { startAuthentication(o: unknown): Promise<unknown> } }).SimpleWebAuthnBrowser;
      return lib.startAuthentication({ optionsJSON: await answer.json() });
    });
    const first = await assertion();
    const used = await app.http.post('/api/passkeys/authentication/verify', { response: first });
    expect(used.status, used.text).toBe(200);
    expect(used.body.user.username).toBe(user.username);
    const replayed = await app.http.post('/api/passkeys/authentication/verify', { response: first });
    expect(replayed.status).toBe(401);
    expect(replayed.body.error).toBe('passkey_refused');
    // the same database, an instance whose PUBLIC_URL (so origin and RP ID) is another
    const elsewhere = await startTestApp({ PUBLIC_URL: 'https://sso.example.test' }, { db: app.db });
    try {
      const refused = await elsewhere.http.post('/api/passkeys/authentication/verify', { response: await assertion() });
      expect(refused.status).toBe(401);
      expect(refused.body.error).toBe('passkey_refused');
    } finally {
      await elsewhere.stop();
    }
    const reasons = (await audit(user.id)).filter((r) => r.action === 'user.login' && r.outcome === 'failure').map((r) => r.details.reason);
    expect(reasons).toStrictEqual(['invalid_passkey', 'invalid_passkey']);
  });

  it('signs each of two users in as themselves with their own passkeys', async () => {
    const first = await userWithPasskey('First');
    const second = await userWithPasskey('Second');
    for (const { user, person } of [second, first]) {
      await passkeySignIn(person.page, clientLogin());
      await person.page.waitForURL(`${client.origin}/callback**`, { timeout: 30_000 });
      expect(lastVisit()!.answer.user?.username).toBe(user.username);
    }
  });

  it('has no axe violations on the sign-in, security and admin user pages, at 1280 and 390 pixels', async () => {
    const user = await makeUser(app);
    const boss = await makeUser(app, { role: 'admin' });
    for (const size of [{ width: 1280, height: 800 }, PHONE]) {
      const person = await personWithAuthenticator(browser, size);
      await person.page.goto(clientLogin());
      await person.page.getByRole('button', { name: 'Sign in with a passkey' }).waitFor();
      await expectAccessible(person.page, `sign-in page with passkeys at ${size.width}px`);
      await passwordSignIn(person.page, base, user);
      await person.page.goto(`${base}/account/security`);
      await person.page.locator('[data-passkey-register]').waitFor();
      await expectAccessible(person.page, `security page, no passkeys, at ${size.width}px`);
      await addPasskey(person.page, base, user.password, `Device ${size.width}`);
      await expectAccessible(person.page, `security page with passkeys at ${size.width}px`);
      await signOut(person.page, base);
      await passwordSignIn(person.page, base, boss);
      await person.page.goto(`${base}/admin/users/${user.id}`);
      await person.page.getByRole('button', { name: `Remove passkey Device ${size.width}` }).waitFor();
      await expectAccessible(person.page, `admin user page with passkeys at ${size.width}px`);
      await person.context.close();
    }
  });
});
