import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSsoClient, type SsoClient } from '../../src/sdk/index.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { claimsOf } from '../links/support.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';

/**
 * A client system as its developers write it with the SDK: an initiate-login route that
 * starts its own sign-in (its own state, kept in its own session), and a callback that
 * checks that state and validates the token.
 */
async function startClientSystem(sso: () => SsoClient) {
  const sessions = new Map<string, { state?: string }>();
  const sidOf = (req: express.Request) => /(?:^|;\s*)shop\.sid=([^;]+)/.exec(req.get('cookie') ?? '')?.[1];
  const seenTokens: string[] = [];
  const app = express();
  app.get('/sso/start', (req, res) => {
    const started = sso().handleInitiateLogin(req.originalUrl);
    if (!started.ok) return void res.status(400).json(started);
    const sid = randomUUID();
    sessions.set(sid, { state: started.state });
    res.setHeader('set-cookie', `shop.sid=${sid}; Path=/; HttpOnly`);
    res.redirect(302, started.url);
  });
  app.get('/sso/callback', async (req, res) => {
    const sid = sidOf(req);
    const expectedState = sid ? sessions.get(sid)?.state : undefined;
    if (sid) sessions.delete(sid);
    seenTokens.push(String(req.query.token));
    res.json(await sso().handleCallback(req.originalUrl, { expectedState }));
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { base, seenTokens, close: () => new Promise((resolve) => server.close(resolve)) };
}

/** Follows one redirect by hand (the browser would): the answer at `url`, without following further. */
async function visit(url: string, cookie?: string) {
  const res = await fetch(url, { redirect: 'manual', headers: cookie ? { cookie } : {} });
  return { status: res.status, location: res.headers.get('location'), cookie: res.headers.get('set-cookie')?.split(';')[0], body: await res.text() };
}

describe('the dashboard\'s one-click sign-in at a client that checks state', () => {
  let app: TestApp;
  let base: string;
  let shop: Awaited<ReturnType<typeof startClientSystem>>;
  let sso: SsoClient;
  beforeAll(async () => {
    app = await startTestApp();
    base = await app.listen();
    shop = await startClientSystem(() => sso);
  });
  afterAll(async () => {
    await shop?.close();
    await app?.close();
  });

  /** A browser signed in to the service's dashboard, at the service's own address. */
  async function dashboardBrowser(user: { username: string; password: string }) {
    const s = formSession(base);
    const page = await s.get('/login');
    const answer = await s.post('/login', { _csrf: hiddenField(page.text, '_csrf'), step: 'password', login: user.username, password: user.password });
    expect(answer.status, answer.text).toBe(303);
    const csrf = hiddenField((await s.get('/dashboard')).text, '_csrf');
    return {
      s,
      link: (clientId: string, name: string) => s.post('/dashboard/link', { _csrf: csrf, client_id: clientId, external_username: name }),
      oneClick: (clientId: string) => s.post('/dashboard/sign-in', { _csrf: csrf, client_id: clientId }),
    };
  }

  it('goes through the client\'s initiate-login URL: the client starts the sign-in with its own state and validates the token', async () => {
    const client = await makeClient(app, { callbackUrl: `${shop.base}/sso/callback`, initiateLoginUri: `${shop.base}/sso/start?tenant=a` });
    sso = createSsoClient({ baseUrl: base, clientId: client.client_id, clientSecret: client.client_secret });
    const user = await makeUser(app, { fullName: 'Grace Hopper' });
    const browser = await dashboardBrowser(user);
    expect((await browser.link(client.client_id, 'g.hopper')).status).toBe(303);
    // the client proves the link, so the dashboard's sign-in carries the name at the client
    await sso.confirmLink(user.id, 'g.hopper');

    // 1. the dashboard sends the browser to the initiate-login URL, with iss, and no token
    const clicked = await browser.oneClick(client.client_id);
    expect(clicked.status).toBe(303);
    const initiate = new URL(clicked.headers.location!);
    expect(`${initiate.origin}${initiate.pathname}`).toBe(`${shop.base}/sso/start`);
    expect(Object.fromEntries(initiate.searchParams)).toStrictEqual({ tenant: 'a', iss: base });
    expect(clicked.headers['cache-control']).toBe('no-store');

    // 2. the client starts its own sign-in at the service, with a state of its own
    const started = await visit(initiate.toString());
    expect(started.status, started.body).toBe(302);
    const signIn = new URL(started.location!);
    expect(`${signIn.origin}${signIn.pathname}`).toBe(`${base}/sso/login`);
    const state = signIn.searchParams.get('state');
    expect(state).toMatch(/^[A-Za-z0-9_-]{43}$/);

    // 3. the browser's session at the service makes it one click: straight to the callback
    const issued = await browser.s.get(`${signIn.pathname}${signIn.search}`);
    expect(issued.status, issued.text).toBe(303);
    const callback = new URL(issued.headers.location!);
    expect(callback.searchParams.get('state')).toBe(state);
    expect(callback.searchParams.has('idp_initiated')).toBe(false);
    expect(claimsOf(callback.searchParams.get('token')).username, 'the dashboard\'s sign-in: the linked name').toBe('g.hopper');

    // 4. the client's callback checks its state and validates the token
    const answered = await visit(callback.toString(), started.cookie);
    expect(JSON.parse(answered.body)).toStrictEqual({
      ok: true, state, expiresAt: expect.any(String),
      user: { id: user.id, username: 'g.hopper', email: user.email, roles: ['user'], full_name: 'Grace Hopper' },
    });
    // audited as the dashboard's sign-in
    const audit = await app.db.query<{ details: Record<string, unknown> }>(
      "SELECT details FROM audit_log WHERE action = 'token.issue' AND user_id = $1 ORDER BY id DESC LIMIT 1", [user.id]);
    expect(audit.rows[0].details).toMatchObject({ flow: 'dashboard', name_at_client: 'g.hopper' });

    // the hand-off is used once: a later sign-in the client starts on its own is an ordinary
    // browser sign-in, under the user's own name
    const later = new URL((await visit(`${shop.base}/sso/start?iss=${encodeURIComponent(base)}`)).location!);
    const laterIssued = await browser.s.get(`${later.pathname}${later.search}`);
    expect(claimsOf(new URL(laterIssued.headers.location!).searchParams.get('token')).username).toBe(user.username);
  });

  it('refuses an initiate-login request naming another issuer, starting nothing', async () => {
    const client = await makeClient(app, { callbackUrl: `${shop.base}/sso/callback`, initiateLoginUri: `${shop.base}/sso/start` });
    sso = createSsoClient({ baseUrl: base, clientId: client.client_id, clientSecret: client.client_secret });
    for (const query of ['', '?iss=https%3A%2F%2Fevil.example']) {
      const r = await visit(`${shop.base}/sso/start${query}`);
      expect(r.status).toBe(400);
      expect(JSON.parse(r.body)).toMatchObject({ ok: false, reason: 'issuer_mismatch' });
    }
    const o = sso.handleInitiateLogin(`/sso/start?iss=${encodeURIComponent(`${base}/`)}&target_link_uri=${encodeURIComponent('https://evil.example/x')}`, { targetOrigin: shop.base });
    expect(o.ok && o.targetLinkUri).toBe(undefined);
    const own = sso.handleInitiateLogin({ iss: base, target_link_uri: `${shop.base}/orders/7` }, { targetOrigin: shop.base });
    expect(own).toMatchObject({ ok: true, targetLinkUri: `${shop.base}/orders/7` });
  });

  it('without an initiate-login URL marks the redirect idp_initiated=1: refused as state_mismatch unless the client opted in', async () => {
    const client = await makeClient(app, { callbackUrl: `${shop.base}/sso/callback` });
    sso = createSsoClient({ baseUrl: base, clientId: client.client_id, clientSecret: client.client_secret });
    const user = await makeUser(app);
    const browser = await dashboardBrowser(user);
    await browser.link(client.client_id, user.username);
    const first = new URL((await browser.oneClick(client.client_id)).headers.location!);
    expect(`${first.origin}${first.pathname}`).toBe(`${shop.base}/sso/callback`);
    expect([first.searchParams.get('idp_initiated'), first.searchParams.has('state')]).toStrictEqual(['1', false]);

    // a client that checks state refuses it, its token unused
    expect(await sso.handleCallback(first.toString(), { expectedState: undefined })).toMatchObject({ ok: false, reason: 'state_mismatch' });
    // opting in needs the browser's address, to which the token is bound
    await expect(sso.handleCallback(first.toString(), { expectedState: undefined, acceptIdpInitiated: true })).rejects.toThrow(TypeError);
    expect(await sso.handleCallback(first.toString(), { expectedState: undefined, acceptIdpInitiated: true, ipAddress: '127.0.0.1' }))
      .toMatchObject({ ok: true, idpInitiated: true, user: { id: user.id, roles: ['user'] } });

    // the option waives nothing else: a token bound to another address is refused
    const second = new URL((await browser.oneClick(client.client_id)).headers.location!);
    expect(await sso.handleCallback(second.toString(), { acceptIdpInitiated: true, ipAddress: '203.0.113.9' })).toMatchObject({ ok: false, reason: 'ip_mismatch' });
    // nor does it let a callback that carries a state skip its check
    const withState = new URL(second);
    withState.searchParams.set('state', 'forged');
    expect(await sso.handleCallback(withState.toString(), { expectedState: 'mine', acceptIdpInitiated: true, ipAddress: '127.0.0.1' }))
      .toMatchObject({ ok: false, reason: 'state_mismatch' });
  });
});
