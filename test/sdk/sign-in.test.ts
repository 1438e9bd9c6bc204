import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// Through the package's own export map, as a client system imports it.
import { buildSignInUrl, createSsoClient, newState, readCallback, SsoError } from '../../src/sdk/index.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { rejectionOf } from '../helpers/expect.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';

describe('SDK browser flow: the sign-in URL and the callback', () => {
  let app: TestApp;
  let base: string;
  beforeAll(async () => {
    app = await startTestApp();
    base = await app.listen();
  });
  afterAll(() => app.close());

  /** A browser at the URL the SDK built: the sign-in form, submitted; answers the callback URL. */
  async function signInAt(url: string, user: { username: string; password: string }): Promise<string> {
    const s = formSession(base);
    const page = await s.get(url);
    expect(page.status, page.text).toBe(200);
    const target = new URL(url);
    const answer = await s.post('/sso/login', {
      _csrf: hiddenField(page.text, '_csrf'), step: 'password', login: user.username, password: user.password,
      client_id: target.searchParams.get('client_id')!, ...(target.searchParams.has('state') ? { state: target.searchParams.get('state')! } : {}),
    });
    expect(answer.status, answer.text).toBe(303);
    return answer.headers.location!;
  }

  it('builds the /sso/login URL of the client, with the state it is given', () => {
    const sso = createSsoClient({ baseUrl: 'https://auth.example.com/sub/', clientId: 'shop & co', clientSecret: 'x' });
    expect(sso.signInUrl()).toBe('https://auth.example.com/sub/sso/login?client_id=shop+%26+co');
    const url = new URL(sso.signInUrl({ state: 'a b/c?' }));
    expect([url.pathname, url.searchParams.get('client_id'), url.searchParams.get('state')]).toStrictEqual(['/sub/sso/login', 'shop & co', 'a b/c?']);
    expect(buildSignInUrl('https://auth.example.com', 'crm')).toBe('https://auth.example.com/sso/login?client_id=crm');
    for (const bad of ['', 'x'.repeat(1025), 'a\nb']) expect(() => sso.signInUrl({ state: bad }), JSON.stringify(bad)).toThrow(TypeError);
    const state = newState();
    expect(state).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(newState()).not.toBe(state);
  });

  it('reads the token and state from a callback URL, a path, a query object or the token itself', () => {
    const expected = { token: 'aaa.bbb.ccc', state: 's 1' };
    expect(readCallback('https://shop.example/cb?from=auth&token=aaa.bbb.ccc&state=s+1')).toStrictEqual(expected);
    expect(readCallback('/cb?token=aaa.bbb.ccc&state=s%201')).toStrictEqual(expected);
    expect(readCallback(new URL('https://shop.example/cb?token=aaa.bbb.ccc&state=s+1'))).toStrictEqual(expected);
    expect(readCallback(new URLSearchParams(expected))).toStrictEqual(expected);
    expect(readCallback({ token: 'aaa.bbb.ccc', state: 's 1' })).toStrictEqual(expected);
    expect(readCallback('aaa.bbb.ccc')).toStrictEqual({ token: 'aaa.bbb.ccc' });
    expect(readCallback({ token: ['a', 'b'] })).toStrictEqual({ token: undefined, state: undefined });
  });

  it('signs in through the page it points at; the callback answers the user once, then a typed refusal', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const sso = createSsoClient({ baseUrl: base, clientId: client.client_id, clientSecret: client.client_secret });
    const state = newState();
    const callback = await signInAt(sso.signInUrl({ state }), user);
    expect(callback.startsWith('https://client.example/sso/callback?')).toBe(true);

    const first = await sso.handleCallback(callback, { expectedState: state });
    expect(first).toStrictEqual({ ok: true, user: { id: user.id, username: user.username, email: user.email, roles: [user.role], full_name: user.full_name }, expiresAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/), state });
    const again = await sso.handleCallback(callback, { expectedState: state });
    expect(again).toStrictEqual({ ok: false, reason: 'token_already_used', message: 'The token has already been used' });
    const garbage = await sso.handleCallback('not-a-token');
    expect(garbage.ok === false && garbage.reason).toBe('invalid_token');
  });

  it('refuses a callback with another state without using its token, and one without a token', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const sso = createSsoClient({ baseUrl: base, clientId: client.client_id, clientSecret: client.client_secret });
    const callback = await signInAt(sso.signInUrl({ state: newState() }), user);
    expect((await sso.handleCallback(callback, { expectedState: newState() })).ok === false).toBe(true);
    expect(await sso.handleCallback(callback, { expectedState: 'short' })).toMatchObject({ ok: false, reason: 'state_mismatch' });
    expect(await sso.handleCallback('https://client.example/sso/callback?state=x')).toMatchObject({ ok: false, reason: 'missing_token' });
    // the token was left alone: the right state still signs in
    expect(await sso.handleCallback(callback)).toMatchObject({ ok: true, user: { id: user.id } });
  });

  it('answers a made-up callback token as a refusal, never a throw: too long, not a token, a NUL character', async () => {
    const client = await makeClient(app);
    const sso = createSsoClient({ baseUrl: base, clientId: client.client_id, clientSecret: client.client_secret });
    for (const callback of [`/cb?token=${'a'.repeat(9000)}`, '/cb?token=abc%00def', `/cb?token=${'a.b.'.repeat(3000)}c`, '/cb?token=not a token']) {
      const result = await sso.handleCallback(callback).catch((e: SsoError) => ({ thrown: `${e.status} ${e.code}` }));
      expect(result, callback.slice(0, 40)).toStrictEqual({ ok: false, reason: 'invalid_token', message: 'The callback does not carry a token this service issued' });
    }
  });

  it('refuses a callback when the expected state is given but empty, without using its token', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const sso = createSsoClient({ baseUrl: base, clientId: client.client_id, clientSecret: client.client_secret });
    // a browser that never started a sign-in has no state in its session: the login-CSRF case
    const { redirect_url } = await sso.issueToken(user.username);
    const session: { ssoState?: string } = {};
    for (const expectedState of [session.ssoState, null, '']) {
      expect(await sso.handleCallback(redirect_url, { expectedState }), JSON.stringify(expectedState)).toStrictEqual({
        ok: false, reason: 'state_mismatch', message: 'The callback does not carry the state this sign-in started with',
      });
    }
    const withState = await signInAt(sso.signInUrl({ state: newState() }), user);
    expect(await sso.handleCallback(withState, { expectedState: undefined })).toMatchObject({ ok: false, reason: 'state_mismatch' });
    // neither token was used: without the option at all (the check is optional) both still sign in
    expect(await sso.handleCallback(redirect_url)).toMatchObject({ ok: true, user: { id: user.id } });
    expect(await sso.handleCallback(withState, {})).toMatchObject({ ok: true, user: { id: user.id } });
  });

  it('throws SsoError, not a refusal, when the client itself is refused', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const good = createSsoClient({ baseUrl: base, clientId: client.client_id, clientSecret: client.client_secret });
    const { redirect_url } = await good.issueToken(user.username);
    const wrong = createSsoClient({ baseUrl: base, clientId: client.client_id, clientSecret: 'not-the-secret' });
    const err = await rejectionOf(wrong.handleCallback(redirect_url), SsoError);
    expect([err.status, err.code]).toStrictEqual([401, 'invalid_client']);
  });
});
