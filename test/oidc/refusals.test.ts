import * as oidc from 'openid-client';
import { toPublicClient } from '../../src/clients/shown.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/http.ts';
import { startIssuer, startReceiver } from './support.ts';

const CLI = { via: 'cli' as const, username: 'test' };

describe('OpenID Connect refusals', () => {
  let service: Awaited<ReturnType<typeof startIssuer>>;
  let rp: Awaited<ReturnType<typeof startReceiver>>;
  let confidential: { id: string; secret: string };
  let offList: { id: string; secret: string };
  let publicId: string;
  beforeAll(async () => {
    service = await startIssuer();
    rp = await startReceiver();
    const clients = service.app.services.clients;
    const a = await clients.createClient({ name: 'Shop', callbackUrl: `${rp.origin}/cb`, allowedIps: ['127.0.0.1', '::1'] }, CLI);
    confidential = { id: a.client.client_id, secret: a.secret };
    const b = await clients.createClient({ name: 'Far away', callbackUrl: `${rp.origin}/cb`, allowedIps: ['203.0.113.7'] }, CLI);
    offList = { id: b.client.client_id, secret: b.secret };
    const c = await clients.createClient({ name: 'Single page', callbackUrl: `${rp.origin}/spa`, public: true }, CLI);
    publicId = c.client.client_id;
  });
  afterAll(async () => {
    await rp?.close();
    await service?.close();
  });

  const authorize = (params: Record<string, string>) => fetch(`${service.issuer}/oidc/auth?${new URLSearchParams({ response_type: 'code', scope: 'openid', ...params })}`, { redirect: 'manual' });

  it('refuses a public client without PKCE, at its redirect URI', async () => {
    const answer = await authorize({ client_id: publicId, redirect_uri: `${rp.origin}/spa`, state: 's1' });
    expect(answer.status).toBe(303);
    const to = new URL(answer.headers.get('location')!);
    expect(to.origin + to.pathname).toBe(`${rp.origin}/spa`);
    expect(to.searchParams.get('error')).toBe('invalid_request');
    expect(to.searchParams.get('error_description')).toMatch(/PKCE|code_challenge/i);
  });

  it('lets a public client with PKCE S256 reach the sign-in page; its JSON has no secret', async () => {
    const answer = await authorize({ client_id: publicId, redirect_uri: `${rp.origin}/spa`, code_challenge: 'x'.repeat(43), code_challenge_method: 'S256' });
    expect(answer.status).toBe(303);
    expect(new URL(answer.headers.get('location')!, service.issuer).pathname).toMatch(/^\/oidc\/interaction\//);
    const listed = (await service.app.services.clients.findClient(publicId))!;
    expect(listed.public).toBe(true);
    expect(toPublicClient(listed)).not.toHaveProperty('client_secret');
  });

  it('shows an error for an unregistered redirect URI and never redirects', async () => {
    const answer = await authorize({ client_id: confidential.id, redirect_uri: 'https://evil.example/cb', state: 's2' });
    expect(answer.status).toBe(400);
    expect(answer.headers.get('location')).toBeNull();
    const page = await answer.text();
    expect(page).toContain('redirect_uri');
    expect(page).not.toContain('evil.example/cb?');
  });

  it('answers prompt=none without a session with login_required', async () => {
    const answer = await authorize({ client_id: confidential.id, redirect_uri: `${rp.origin}/cb`, prompt: 'none', state: 's3' });
    const to = new URL(answer.headers.get('location')!);
    expect(to.searchParams.get('error')).toBe('login_required');
    expect(to.searchParams.get('state')).toBe('s3');
  });

  it('refuses a wrong secret with invalid_client, audited with the address', async () => {
    const config = await oidc.discovery(new URL(service.issuer), confidential.id, 'not-the-secret', undefined, { execute: [oidc.allowInsecureRequests] });
    await expect(oidc.refreshTokenGrant(config, 'whatever')).rejects.toMatchObject({ error: 'invalid_client' });
    const basic = await fetch(`${service.issuer}/oidc/token`, {
      method: 'POST',
      headers: { authorization: basicAuth(confidential.id, 'wrong'), 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=refresh_token&refresh_token=x',
    });
    expect(basic.status).toBe(401);
    expect((await basic.json()).error).toBe('invalid_client');
    const audit = await service.app.db.query<{ ip_address: string; client_id: string }>(
      "SELECT ip_address, client_id FROM audit_log WHERE action = 'oidc.client_auth' AND outcome = 'failure' AND client_id = $1", [confidential.id]);
    expect(audit.rows.length).toBe(2);
    expect(audit.rows[0].ip_address).toBe('127.0.0.1');
  });

  it('accepts the right secret by client_secret_post and client_secret_basic (the grant is what is wrong)', async () => {
    for (const auth of [oidc.ClientSecretPost(confidential.secret), oidc.ClientSecretBasic(confidential.secret)]) {
      const config = await oidc.discovery(new URL(service.issuer), confidential.id, confidential.secret, auth, { execute: [oidc.allowInsecureRequests] });
      await expect(oidc.refreshTokenGrant(config, 'not-a-token')).rejects.toMatchObject({ error: 'invalid_grant' });
    }
  });

  it('refuses token, introspection and revocation from outside the allow list with 403', async () => {
    for (const path of ['token', 'token/introspection', 'token/revocation']) {
      const answer = await fetch(`${service.issuer}/oidc/${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ client_id: offList.id, client_secret: offList.secret, grant_type: 'refresh_token', refresh_token: 'x', token: 'x' }),
      });
      expect(answer.status, path).toBe(403);
      expect((await answer.json()).error_description).toMatch(/not allowed/);
    }
  });

  it('keeps the SPEC routes as they were beside it', async () => {
    const answer = await fetch(`${service.issuer}/api/sso/token`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_id: confidential.id, client_secret: 'wrong', username: 'nobody' }),
    });
    expect(answer.status).toBe(401);
  });
});
