import * as oidc from 'openid-client';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deliveries, enrolledUser, subscribe, totpCode } from '../auth/support.ts';
import { browserMissing, clickAndLoad, newContext, releaseBrowser, sharedBrowser } from '../helpers/browser.ts';
import { makeUser } from '../helpers/factories.ts';
import { fillSignIn, startIssuer, startReceiver } from './support.ts';

const CLI = { via: 'cli' as const, username: 'test' };

describe.skipIf(browserMissing)('OpenID Connect sign-in on the service page (Chromium)', () => {
  let service: Awaited<ReturnType<typeof startIssuer>>;
  let rp: Awaited<ReturnType<typeof startReceiver>>;
  let browser: Browser;
  let clientId: string;
  let config: oidc.Configuration;
  beforeAll(async () => {
    service = await startIssuer({ RATE_LIMIT_LOGIN_PER_MIN: '100000' });
    rp = await startReceiver();
    browser = await sharedBrowser();
    const { client, secret } = await service.app.services.clients.createClient({
      name: 'Wiki', callbackUrl: `${rp.origin}/cb`, allowedIps: ['127.0.0.1'], backchannelLogoutUri: `${rp.origin}/backchannel`,
    }, CLI);
    clientId = client.client_id;
    config = await oidc.discovery(new URL(service.issuer), clientId, secret, undefined, { execute: [oidc.allowInsecureRequests] });
  });
  afterAll(async () => {
    await releaseBrowser(browser);
    await rp?.close();
    await service?.close();
  });

  async function startAuthorization(page: Page, extra: Record<string, string> = {}) {
    const verifier = oidc.randomPKCECodeVerifier();
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: `${rp.origin}/cb`, scope: 'openid profile offline_access', prompt: 'consent',
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', ...extra,
    });
    await page.goto(url.href);
    return {
      finish: async () => {
        await page.waitForURL(`${rp.origin}/cb?**`);
        return oidc.authorizationCodeGrant(config, new URL(page.url()), { pkceCodeVerifier: verifier, expectedState: oidc.skipStateCheck });
      },
    };
  }

  it('five wrong passwords on the OpenID Connect sign-in lock the account for POST /api/auth/login too', async () => {
    const user = await makeUser(service.app);
    const page = await (await newContext(browser)).newPage();
    await startAuthorization(page);
    for (let i = 0; i < 5; i++) await fillSignIn(page, user.username, 'wrong password');
    expect(await page.locator('.flash, [role=alert]').first().textContent()).toMatch(/locked/i);
    const api = await service.app.http.post('/api/auth/login', { login: user.username, password: user.password });
    expect(api.status).toBe(423);
    await page.context().close();
  });

  it('asks a two-factor user for the code, then signs in and sends user.login for the client', async () => {
    const { user, secret } = await enrolledUser(service.app);
    const hook = await subscribe(service.app, ['user.login']);
    const page = await (await newContext(browser)).newPage();
    const flow = await startAuthorization(page);
    await fillSignIn(page, user.username, user.password);
    expect(page.url(), 'no code without the second factor').not.toContain(rp.origin);
    await page.getByLabel('Authentication code').fill(await totpCode(secret));
    await clickAndLoad(page, page.getByRole('button', { name: /Verify|Continue|Sign in/ }));
    const tokens = await flow.finish();
    expect(tokens.claims()!.sub).toBe(String(user.id));
    const audit = await service.app.db.query<{ details: { two_factor: boolean }; client_id: string; ip_address: string }>(
      "SELECT details, client_id, ip_address FROM audit_log WHERE action = 'oidc.sign_in' AND user_id = $1", [user.id]);
    expect(audit.rows).toMatchObject([{ client_id: clientId, ip_address: '127.0.0.1', details: { two_factor: true } }]);
    const sent = (await deliveries(service.app, hook, 'user.login')).filter((d) => d.user_id === user.id && d.client_system === clientId);
    expect(sent).toMatchObject([{ user_id: user.id, email: user.email, client_system: clientId, '2fa_used': true }]);
    await page.context().close();
  });

  it('prompt=login asks again in a signed-in browser; sign-out at the service sends a back-channel logout; deactivation stops refresh', async () => {
    const user = await makeUser(service.app);
    const page = await (await newContext(browser)).newPage();
    const first = await startAuthorization(page);
    await fillSignIn(page, user.username, user.password);
    const tokens = await first.finish();

    const forced = await startAuthorization(page, { prompt: 'login' });
    expect(await page.getByLabel('Password').count(), 'prompt=login shows the form').toBe(1);
    await fillSignIn(page, user.username, user.password);
    await forced.finish();

    const before = rp.posts.length;
    await page.goto(`${service.issuer}/sso/logout`);
    await expect.poll(() => rp.posts.slice(before).filter((p) => p.path === '/backchannel').length, { timeout: 15_000 }).toBeGreaterThan(0);
    const logout = new URLSearchParams(rp.posts.filter((p) => p.path === '/backchannel').at(-1)!.body).get('logout_token')!;
    const claims = JSON.parse(Buffer.from(logout.split('.')[1], 'base64url').toString()) as Record<string, unknown>;
    expect(claims).toMatchObject({ iss: service.issuer, aud: clientId, sub: String(user.id) });

    // the refresh token outlives a sign-out (offline access), not a deactivation
    const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token!);
    await service.app.services.users.setActive(user.username, false, CLI);
    await expect(oidc.refreshTokenGrant(config, refreshed.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
    await page.context().close();
  });
});
