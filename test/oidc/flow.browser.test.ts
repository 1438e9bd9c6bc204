import { createRemoteJWKSet, jwtVerify } from 'jose';
import * as oidc from 'openid-client';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserMissing, newContext, releaseBrowser, sharedBrowser } from '../helpers/browser.ts';
import { makeUser } from '../helpers/factories.ts';
import { fillSignIn, startIssuer, startReceiver } from './support.ts';

const CLI = { via: 'cli' as const, username: 'test' };

describe.skipIf(browserMissing)('OpenID Connect with openid-client and Chromium', () => {
  let service: Awaited<ReturnType<typeof startIssuer>>;
  let rp: Awaited<ReturnType<typeof startReceiver>>;
  let browser: Browser;
  let clientId: string;
  let clientSecret: string;
  let config: oidc.Configuration;
  beforeAll(async () => {
    service = await startIssuer();
    rp = await startReceiver();
    browser = await sharedBrowser();
    const { client, secret } = await service.app.services.clients.createClient({
      name: 'Wiki', callbackUrl: `${rp.origin}/sso/callback`, redirectUris: [`${rp.origin}/oidc/callback`],
      postLogoutRedirectUris: [`${rp.origin}/signed-out`], allowedIps: ['127.0.0.1'],
    }, CLI);
    clientId = client.client_id;
    clientSecret = secret;
    config = await oidc.discovery(new URL(service.issuer), clientId, clientSecret, oidc.ClientSecretBasic(clientSecret), { execute: [oidc.allowInsecureRequests] });
  });
  afterAll(async () => {
    await releaseBrowser(browser);
    await rp?.close();
    await service?.close();
  });

  it('publishes its discovery document at the issuer', async () => {
    const meta = config.serverMetadata();
    expect(meta.issuer).toBe(service.issuer);
    for (const endpoint of ['authorization_endpoint', 'token_endpoint', 'userinfo_endpoint', 'jwks_uri', 'introspection_endpoint', 'revocation_endpoint', 'end_session_endpoint'] as const) {
      expect(meta[endpoint], endpoint).toMatch(new RegExp(`^${service.issuer}/oidc/`));
    }
    expect(meta.code_challenge_methods_supported).toContain('S256');
    expect(meta.grant_types_supported).toEqual(expect.arrayContaining(['authorization_code', 'refresh_token']));
    expect(meta.id_token_signing_alg_values_supported).toContain('RS256');
    const jwks = await (await fetch(meta.jwks_uri!)).json() as { keys: Array<Record<string, unknown>> };
    expect(jwks.keys.length).toBeGreaterThan(0);
    for (const key of jwks.keys) {
      expect(key.kid).toEqual(expect.any(String));
      expect(key.d, 'no private part published').toBeUndefined();
    }
  });

  it('signs in with code + PKCE on the service page, then userinfo, refresh (rotated), introspection, revocation and end session', async () => {
    const user = await makeUser(service.app, { fullName: 'Ada Lovelace' });
    const context = await newContext(browser);
    const page = await context.newPage();
    const verifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const nonce = oidc.randomNonce();
    const authorize = oidc.buildAuthorizationUrl(config, {
      redirect_uri: `${rp.origin}/oidc/callback`, scope: 'openid profile email offline_access', prompt: 'consent',
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state, nonce,
    });
    await page.goto(authorize.href);
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Sign in');
    await fillSignIn(page, user.username, user.password);
    await page.waitForURL(`${rp.origin}/oidc/callback?**`);

    const tokens = await oidc.authorizationCodeGrant(config, new URL(page.url()), { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce });
    const claims = tokens.claims()!;
    expect(claims.sub).toBe(String(user.id));
    expect(claims.iss).toBe(service.issuer);
    expect(claims.aud).toBe(clientId);
    expect(claims.preferred_username).toBe(user.username);
    expect(claims.roles).toEqual(['user']);
    const verified = await jwtVerify(tokens.id_token!, createRemoteJWKSet(new URL(config.serverMetadata().jwks_uri!)), { issuer: service.issuer, audience: clientId });
    expect(verified.protectedHeader.alg).toBe('RS256');
    expect(verified.protectedHeader.kid).toEqual(expect.any(String));

    const info = await oidc.fetchUserInfo(config, tokens.access_token, claims.sub);
    expect(info).toMatchObject({ sub: String(user.id), name: 'Ada Lovelace', preferred_username: user.username, email: user.email, roles: ['user'] });

    expect(tokens.refresh_token).toEqual(expect.any(String));
    const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token!);
    expect(refreshed.refresh_token).toEqual(expect.any(String));
    expect(refreshed.refresh_token, 'rotated').not.toBe(tokens.refresh_token);
    expect((await oidc.tokenIntrospection(config, refreshed.refresh_token!)).active).toBe(true);
    // the rotated-out refresh token is spent, and presenting it again revokes what the grant issued
    await expect(oidc.refreshTokenGrant(config, tokens.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
    expect((await oidc.tokenIntrospection(config, refreshed.refresh_token!)).active).toBe(false);

    // the code was single use
    await expect(oidc.authorizationCodeGrant(config, new URL(page.url()), { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce }))
      .rejects.toMatchObject({ error: 'invalid_grant' });

    // a second authorization: this browser is signed in, no form
    const verifier2 = oidc.randomPKCECodeVerifier();
    const again = oidc.buildAuthorizationUrl(config, { redirect_uri: `${rp.origin}/oidc/callback`, scope: 'openid', code_challenge: await oidc.calculatePKCECodeChallenge(verifier2), code_challenge_method: 'S256', state });
    await page.goto(again.href);
    await page.waitForURL(`${rp.origin}/oidc/callback?**`);
    const second = await oidc.authorizationCodeGrant(config, new URL(page.url()), { pkceCodeVerifier: verifier2, expectedState: state });
    expect(second.claims()!.sub).toBe(String(user.id));
    expect((await oidc.tokenIntrospection(config, second.access_token)).active).toBe(true);
    await oidc.tokenRevocation(config, second.access_token);
    expect((await oidc.tokenIntrospection(config, second.access_token)).active).toBe(false);

    // RP-initiated logout ends the session at the service too; the next authorization shows the form
    const end = oidc.buildEndSessionUrl(config, { id_token_hint: tokens.id_token!, post_logout_redirect_uri: `${rp.origin}/signed-out` });
    await page.goto(end.href);
    await page.getByRole('button', { name: 'Yes, sign me out' }).click();
    await page.waitForURL(`${rp.origin}/signed-out**`);
    const dashboard = await page.goto(`${service.issuer}/dashboard`);
    expect(new URL(dashboard!.url()).pathname, 'signed out at the service').toBe('/login');
    await page.goto(again.href);
    expect(await page.getByLabel('Password').count(), 'the sign-in form again').toBe(1);
    await context.close();
  });
});
