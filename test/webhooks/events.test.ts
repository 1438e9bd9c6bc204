import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate } from 'otplib';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { withClockBehind } from '../helpers/clock.ts';
import { makeClient, makeUser, TEST_PASSWORD } from '../helpers/factories.ts';
import { EVENT_TYPES } from '../../src/webhooks/events.ts';
import { verifyWebhook } from '../../src/webhooks/verify.ts';
import { adminHeaders, type Receiver, registerWebhook, sleep, startReceiver } from './receiver.ts';

const SECRET = 'events-secret-0123456789abcdef';
const UA = { 'user-agent': 'events-test/1.0' };

function jwtPayload(token: string): Record<string, any> {
  return JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString('utf8'));
}

describe('each of the seven events arrives, signed, with its documented data', () => {
  let app: TestApp;
  let receiver: Receiver;
  beforeAll(async () => {
    // short-lived tokens and a fast sweep so token.expired can be observed for real
    app = await startTestApp({ TOKEN_TTL_SECONDS: '5', TOKEN_SWEEP_INTERVAL_MS: '200', LOCKOUT_THRESHOLD: '5' });
    receiver = await startReceiver();
    await registerWebhook(app, await adminHeaders(app), { url: receiver.url, events: [...EVENT_TYPES], secret: SECRET });
  });
  afterAll(async () => {
    await receiver.close();
    await app.close();
  });

  /** The one delivery of `event` whose data matches `where`, verified with the secret. */
  async function arrival(event: string, where: (data: Record<string, any>) => boolean) {
    await receiver.waitFor(() => receiver.of(event).some((r) => where(r.body.data)));
    const matching = receiver.of(event).filter((r) => where(r.body.data));
    expect(matching.length, `exactly one ${event}`).toBe(1);
    const [r] = matching;
    const envelope = verifyWebhook<Record<string, any>>(r.raw, r.headers, SECRET);
    expect(r.headers['x-auth-event']).toBe(event);
    expect(envelope.event).toBe(event);
    return envelope.data;
  }

  it('client.registered {client_id, client_name} when a client system is added', async () => {
    const client = await makeClient(app, { name: 'Events Client One' });
    const data = await arrival('client.registered', (d) => d.client_id === client.client_id);
    expect(data).toStrictEqual({ client_id: client.client_id, client_name: 'Events Client One' });
  });

  it('user.login (the fields of the event table, docs/webhooks.md) when an SSO token is issued', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const issued = await app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username: user.username, ip_address: '203.0.113.7' }, { headers: UA });
    expect(issued.status, issued.text).toBe(200);
    const data = await arrival('user.login', (d) => d.user_id === user.id);
    expect(data).toStrictEqual({
      user_id: user.id, email: user.email, ip_address: '203.0.113.7', user_agent: 'events-test/1.0',
      client_system: client.client_id, '2fa_used': false,
    });
    expect(typeof data.user_id).toBe('number');
  });

  it('user.login_failed for a wrong password, and user.locked at the fifth', async () => {
    const user = await makeUser(app);
    for (let i = 0; i < 5; i++) {
      const r = await app.http.post('/api/auth/login', { login: user.username, password: 'wrong password' }, { headers: UA });
      expect([r.status, r.body.locked], r.text).toStrictEqual(i < 4 ? [401, undefined] : [401, true]); // the fifth sets the lock and says so
    }
    await receiver.waitFor(() => receiver.of('user.login_failed').filter((r) => r.body.data.user_id === user.id).length === 5);
    for (const r of receiver.of('user.login_failed').filter((x) => x.body.data.user_id === user.id)) {
      const { data } = verifyWebhook(r.raw, r.headers, SECRET);
      expect(data).toStrictEqual({ username: user.username, user_id: user.id, ip_address: '127.0.0.1', user_agent: 'events-test/1.0', reason: 'invalid_password' });
    }
    const locked = await arrival('user.locked', (d) => d.user_id === user.id);
    expect(Object.keys(locked).sort()).toStrictEqual(['email', 'ip_address', 'locked_until', 'user_id']);
    expect(locked.email).toBe(user.email);
    expect(locked.ip_address).toBe('127.0.0.1');
    expect(Date.parse(locked.locked_until) > Date.now() + 29 * 60_000, 'locked for 30 minutes').toBeTruthy();
  });

  it('user.login_failed names an unknown user as null', async () => {
    const r = await app.http.post('/api/auth/login', { login: 'nobody-here-xyz', password: 'whatever' }, { headers: UA });
    expect(r.status).toBe(401);
    const data = await arrival('user.login_failed', (d) => d.username === 'nobody-here-xyz');
    expect(data.user_id).toBe(null);
    expect(data.reason).toBe('unknown_user');
  });

  it('user.logout {user_id, email, ip_address, client_system} when the session ends', async () => {
    const user = await makeUser(app);
    const login = await app.http.post('/api/auth/login', { login: user.username, password: TEST_PASSWORD }, { headers: UA });
    expect(login.status, login.text).toBe(200);
    const cookie = String(login.headers['set-cookie']?.[0] ?? '').split(';')[0];
    expect(cookie, 'a session cookie').toBeTruthy();
    const out = await app.http.post('/api/auth/logout', undefined, { headers: { ...UA, cookie } });
    expect(out.status, out.text).toBe(200);
    const data = await arrival('user.logout', (d) => d.user_id === user.id);
    expect(Object.keys(data).sort()).toStrictEqual(['client_system', 'email', 'ip_address', 'user_id']);
    expect(data.email).toBe(user.email);
    expect(data.ip_address).toBe('127.0.0.1');
    expect(typeof data.client_system).toBe('string');
  });

  it('user.2fa_enabled {user_id, email} when the user turns on TOTP', async () => {
    const user = await makeUser(app);
    const login = await app.http.post('/api/login', { username: user.username, password: TEST_PASSWORD });
    const auth = { authorization: `Bearer ${login.body.token}` };
    const setup = await app.http.post('/api/user/2fa/setup', undefined, { headers: auth });
    expect(setup.status, setup.text).toBe(200);
    const code = await generate({ secret: setup.body.secret });
    const enable = await app.http.post('/api/user/2fa/enable', { code, current_password: TEST_PASSWORD }, { headers: auth });
    expect(enable.status, enable.text).toBe(200);
    const data = await arrival('user.2fa_enabled', (d) => d.user_id === user.id);
    expect(data).toStrictEqual({ user_id: user.id, email: user.email });
  });

  it('token.expired {user_id, token_id, client_system, expired_at} once per token that expired unused', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const creds = { client_id: client.client_id, client_secret: client.client_secret, username: user.username };
    // issued as if 4 s ago: it expires within a second instead of after TOKEN_TTL_SECONDS (5)
    const unused = await withClockBehind(4, () => app.http.post('/api/sso/token', creds));
    const used = await app.http.post('/api/sso/token', creds);
    expect((await app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token: used.body.token })).status).toBe(200);
    const claims = jwtPayload(unused.body.token);
    const data = await arrival('token.expired', (d) => d.token_id === claims.jti);
    expect(data).toStrictEqual({
      user_id: user.id, token_id: claims.jti, client_system: client.client_id, expired_at: new Date(claims.exp * 1000).toISOString(),
    });
    await sleep(600); // several more sweeps
    expect(receiver.of('token.expired').filter((r) => r.body.data.token_id === claims.jti).length, 'sent once').toBe(1);
    const usedJti = jwtPayload(used.body.token).jti;
    expect(receiver.of('token.expired').some((r) => r.body.data.token_id === usedJti), 'not for a used token').toBe(false);
  });

  it('sends an event only to webhooks subscribed to it', async () => {
    const other = await startReceiver();
    try {
      await registerWebhook(app, await adminHeaders(app), { url: other.url, events: ['user.locked'], secret: SECRET });
      const client = await makeClient(app);
      await receiver.waitFor(() => receiver.of('client.registered').some((r) => r.body.data.client_id === client.client_id));
      await sleep(200);
      expect(other.of('client.registered').length).toBe(0);
      expect(other.of('user.login').length, 'not even the admin sign-in').toBe(0);
    } finally {
      await other.close();
    }
  });
});
