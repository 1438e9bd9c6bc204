import * as oidc from 'openid-client';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unique } from '../helpers/app.ts';
import { browserMissing, newContext, releaseBrowser, sharedBrowser } from '../helpers/browser.ts';
import { makeUser } from '../helpers/factories.ts';
import { fillSignIn, startIssuer, startReceiver } from '../oidc/support.ts';

const CLI = { via: 'cli' as const, username: 'test' };

/** A client's access rule on the OpenID Connect flow (docs/access.md): the authorization, the roles claim, refresh and userinfo. */
describe.skipIf(browserMissing)('who may use which client system, over OpenID Connect', () => {
  let service: Awaited<ReturnType<typeof startIssuer>>;
  let rp: Awaited<ReturnType<typeof startReceiver>>;
  let browser: Browser;
  let config: oidc.Configuration;
  let clientId: string;
  let group: string;
  beforeAll(async () => {
    service = await startIssuer();
    rp = await startReceiver();
    browser = await sharedBrowser();
    group = unique('finance-');
    await service.app.services.access.createGroup(group, CLI);
    const { client, secret } = await service.app.services.clients.createClient({
      name: 'Billing', callbackUrl: `${rp.origin}/sso/callback`, redirectUris: [`${rp.origin}/oidc/callback`], allowedIps: ['127.0.0.1'], allowGroups: [group],
    }, CLI);
    clientId = client.client_id;
    config = await oidc.discovery(new URL(service.issuer), clientId, secret, oidc.ClientSecretBasic(secret), { execute: [oidc.allowInsecureRequests] });
  });
  afterAll(async () => {
    await releaseBrowser(browser);
    await rp?.close();
    await service?.close();
  });

  const authorizeUrl = () => oidc.buildAuthorizationUrl(config, {
    redirect_uri: `${rp.origin}/oidc/callback`, scope: 'openid offline_access', prompt: 'consent', state: 'st-1',
  });
  const audit = (userId: number, action: string, outcome: string) => service.app.db.query<{ details: Record<string, unknown> }>(
    'SELECT details FROM audit_log WHERE user_id = $1 AND action = $2 AND outcome = $3 AND client_id = $4', [userId, action, outcome, clientId]);

  it('admits a member: the ID token carries the group in roles; once they leave the group, refresh and userinfo are refused', async () => {
    const user = await makeUser(service.app);
    await service.app.services.access.addToGroup(user.id, group, CLI);
    const page = await (await newContext(browser)).newPage();
    await page.goto(authorizeUrl().href);
    await fillSignIn(page, user.username, user.password);
    await page.waitForURL(`${rp.origin}/oidc/callback?**`);
    const tokens = await oidc.authorizationCodeGrant(config, new URL(page.url()), { expectedState: 'st-1' });
    expect(tokens.claims()!.roles).toStrictEqual(['user', `group:${group}`]);
    expect((await oidc.refreshTokenGrant(config, tokens.refresh_token!)).refresh_token).toEqual(expect.any(String));

    await service.app.services.access.removeFromGroup(user.id, group, CLI);
    const again = await oidc.refreshTokenGrant(config, tokens.refresh_token!).catch((err: unknown) => err);
    expect(again).toMatchObject({ error: 'invalid_grant' });
    const info = await fetch(config.serverMetadata().userinfo_endpoint!, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    expect(info.status).toBe(401);
    await page.context().close();
  });

  it('refuses an outsider at the sign-in page with access_denied at the redirect URI: no code, audited, no user.login', async () => {
    const user = await makeUser(service.app);
    const page = await (await newContext(browser)).newPage();
    await page.goto(authorizeUrl().href);
    await fillSignIn(page, user.username, user.password);
    await page.waitForURL(`${rp.origin}/oidc/callback?**`);
    const back = new URL(page.url());
    expect(back.searchParams.get('error')).toBe('access_denied');
    expect(back.searchParams.get('code')).toBeNull();
    expect(back.searchParams.get('state')).toBe('st-1');
    const refused = await audit(user.id, 'user.login', 'failure');
    expect(refused.rows.map((r) => r.details.reason)).toStrictEqual(['access_denied']);
    expect((await service.app.db.query("SELECT 1 FROM audit_log WHERE user_id = $1 AND action = 'user.login' AND outcome = 'success'", [user.id])).rowCount).toBe(0);
    await page.context().close();
  });

  it('refuses a browser already signed in at the service whose user the rule does not admit', async () => {
    const user = await makeUser(service.app);
    const page = await (await newContext(browser)).newPage();
    await page.goto(`${service.issuer}/login`);
    await fillSignIn(page, user.username, user.password);
    await page.waitForURL(`${service.issuer}/dashboard`);
    await page.goto(authorizeUrl().href);
    await page.waitForURL(`${rp.origin}/oidc/callback?**`);
    expect(new URL(page.url()).searchParams.get('error')).toBe('access_denied');
    expect((await audit(user.id, 'oidc.sign_in', 'failure')).rows.map((r) => r.details.reason)).toStrictEqual(['access_denied']);
    await page.context().close();
  });
});
