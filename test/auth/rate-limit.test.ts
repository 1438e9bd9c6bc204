import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, unique, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { type HttpResponse, send } from '../helpers/http.ts';

const LIMITS = { RATE_LIMIT_LOGIN_PER_MIN: '10', RATE_LIMIT_VALIDATE_PER_MIN: '100', RATE_LIMIT_USER_PER_MIN: '5', RATE_LIMIT_CLIENT_AUTH_FAILURES_PER_MIN: '3' };

/** A 429 for failed client authentications: no quota to report, so Retry-After without RateLimit headers. */
function assertRefusedAddress(r: HttpResponse): void {
  expect(r.status, r.text).toBe(429);
  expect(r.body.error).toBe('rate_limited');
  expect(r.body.message).toMatch(/failed client authentications/);
  expect(Number.isInteger(r.body.retry_after) && r.body.retry_after >= 1 && r.body.retry_after <= 60, `retry_after ${r.body.retry_after}`).toBeTruthy();
  expect(r.headers['retry-after']).toBe(String(r.body.retry_after));
}

function assertRateLimited(r: HttpResponse): void {
  expect(r.status, r.text).toBe(429);
  expect(r.body.error).toBe('rate_limited');
  expect(typeof r.body.message).toBe('string');
  expect(Number.isInteger(r.body.retry_after) && r.body.retry_after >= 1 && r.body.retry_after <= 60, `retry_after ${r.body.retry_after}`).toBeTruthy();
  expect(r.headers['retry-after']).toBe(String(r.body.retry_after));
  expect(r.headers.ratelimit, 'RateLimit header').toBeTruthy();
  expect(r.headers['ratelimit-policy'], 'RateLimit-Policy header').toBeTruthy();
}

describe('rate limits', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp(LIMITS);
  });
  afterAll(() => app.close());

  const loginFrom = (localAddress: string, body: Record<string, unknown>, headers: Record<string, string> = {}, path = '/api/auth/login') =>
    send(app.app, path, { method: 'POST', body, localAddress, headers });

  it('answers the 11th login in a minute from one IP with 429 and retry_after; another IP has its own counter', async () => {
    const user = await makeUser(app);
    for (let i = 0; i < 10; i++) {
      // both login endpoints draw on the same per-IP budget
      const path = i % 2 === 0 ? '/api/auth/login' : '/api/login';
      // a different (unknown) name each time, so the lockout never answers first
      const body = path === '/api/login' ? { username: unique('nobody'), password: 'wrong' } : { login: unique('nobody'), password: 'wrong' };
      const r = await loginFrom('127.0.0.2', body, {}, path);
      expect(r.status, `attempt ${i + 1}: ${r.text}`).toBe(401);
      expect(r.headers.ratelimit, 'RateLimit header on every answer').toBeTruthy();
    }
    assertRateLimited(await loginFrom('127.0.0.2', { login: user.username, password: user.password }));
    assertRateLimited(await loginFrom('127.0.0.2', { username: user.username, password: user.password }, {}, '/api/login'));

    const elsewhere = await loginFrom('127.0.0.3', { login: user.username, password: user.password });
    expect(elsewhere.status, 'a second source address is counted separately').toBe(200);
  });

  it('is not escaped by a forged X-Forwarded-For while TRUST_PROXY is unset', async () => {
    const user = await makeUser(app);
    for (let i = 0; i < 10; i++) {
      const r = await loginFrom('127.0.0.4', { login: unique('nobody'), password: 'wrong' }, { 'x-forwarded-for': `198.51.100.${i + 1}` });
      expect(r.status).toBe(401);
    }
    assertRateLimited(await loginFrom('127.0.0.4', { login: user.username, password: user.password }, { 'x-forwarded-for': '198.51.100.200' }));
  });

  it('answers the 101st validation by one client in a minute with 429; another client is unaffected', async () => {
    const client = await makeClient(app);
    const other = await makeClient(app);
    const validate = (c: { client_id: string; client_secret: string }) =>
      app.http.post('/api/sso/validate', { client_id: c.client_id, client_secret: c.client_secret, token: 'not.a.token' });
    for (let i = 0; i < 100; i++) {
      const r = await validate(client);
      expect(r.status, `validation ${i + 1}: ${r.text}`).toBe(401);
    }
    assertRateLimited(await validate(client));
    expect((await validate(other)).status, 'the other client still reaches the validator').toBe(401);
  });

  it('refuses the failures of an address at a client id past the limit; successes do not count; right secrets are always served', async () => {
    const user = await makeUser(app);
    const client = await makeClient(app, { allowedIps: ['127.0.0.0/8'] });
    const issue = (from: string, body: Record<string, string>) =>
      send(app.app, '/api/sso/token', { method: 'POST', body: { client_id: client.client_id, client_secret: client.client_secret, username: user.username, ...body }, localAddress: from });
    for (let i = 0; i < 5; i++) expect((await issue('127.0.0.5', {})).status, 'a success is no failure').toBe(200);
    for (let i = 0; i < 3; i++) expect((await issue('127.0.0.5', { client_secret: 'wrong' })).status).toBe(401);
    assertRefusedAddress(await issue('127.0.0.5', { client_secret: 'wrong' }));
    expect((await issue('127.0.0.5', {})).status, 'the right secret from that address is served').toBe(200);
    const validated = await send(app.app, '/api/sso/validate', {
      method: 'POST', body: { client_id: client.client_id, client_secret: 'wrong', token: 'not.a.token' }, localAddress: '127.0.0.5',
    });
    assertRefusedAddress(validated);
    expect((await issue('127.0.0.6', { client_secret: 'wrong' })).status, 'another address has its own count').toBe(401);
    const unknown = unique('nope').toLowerCase();
    expect((await issue('127.0.0.5', { client_id: unknown })).status, 'another client id has its own count').toBe(401);
  });

  it('30 wrong secrets from one address leave other clients, and the same client with its right secret, served from it', async () => {
    const user = await makeUser(app);
    const [guessed, neighbour] = [await makeClient(app, { allowedIps: ['127.0.0.0/8'] }), await makeClient(app, { allowedIps: ['127.0.0.0/8'] })];
    const issue = (client: { client_id: string }, secret: string) =>
      send(app.app, '/api/sso/token', { method: 'POST', body: { client_id: client.client_id, client_secret: secret, username: user.username }, localAddress: '127.0.0.7' });
    const statuses: number[] = [];
    for (let i = 0; i < 30; i++) statuses.push((await issue(guessed, `wrong-${i}`)).status);
    expect(statuses.slice(0, 3)).toStrictEqual([401, 401, 401]);
    expect(new Set(statuses.slice(3)), 'the wrong secrets past the limit are refused').toStrictEqual(new Set([429]));
    expect((await issue(neighbour, neighbour.client_secret)).status, 'another client from that address').toBe(200);
    expect((await issue(guessed, guessed.client_secret)).status, 'the same client with its right secret').toBe(200);
    const validated = await send(app.app, '/api/sso/validate', {
      method: 'POST', body: { client_id: neighbour.client_id, client_secret: neighbour.client_secret, token: 'not.a.token' }, localAddress: '127.0.0.7',
    });
    expect([validated.status, validated.body.error]).toStrictEqual([401, 'invalid_token']);
    assertRefusedAddress(await issue(guessed, 'wrong-again'));
  });

  it('limits user endpoints per signed-in user', async () => {
    const [alice, bob] = [await makeUser(app), await makeUser(app)];
    const tokenOf = async (u: { username: string; password: string }) =>
      (await loginFrom('127.0.0.5', { username: u.username, password: u.password }, {}, '/api/login')).body.token as string;
    const aliceToken = await tokenOf(alice);
    const bobToken = await tokenOf(bob);
    for (let i = 0; i < 5; i++) expect((await app.http.get('/api/user', { headers: { authorization: `Bearer ${aliceToken}` } })).status).toBe(200);
    assertRateLimited(await app.http.get('/api/user', { headers: { authorization: `Bearer ${aliceToken}` } }));
    expect((await app.http.get('/api/user', { headers: { authorization: `Bearer ${bobToken}` } })).status, 'another user has their own budget').toBe(200);
  });
});

describe.skipIf(!process.env.TEST_REDIS_URL && 'TEST_REDIS_URL not set')('rate limits shared through Redis', () => {
  let first: TestApp;
  let second: TestApp;
  beforeAll(async () => {
    const env = { ...LIMITS, REDIS_URL: process.env.TEST_REDIS_URL!, TRUST_PROXY: 'loopback' };
    first = await startTestApp(env);
    second = await startTestApp(env, { db: first.db });
  });
  afterAll(async () => {
    await second.stop();
    await first.close();
  });

  it('counts validations of one client across two instances', async () => {
    const client = await makeClient(first); // a fresh client_id: no other run shares its counter
    const validate = (app: TestApp) =>
      app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token: 'not.a.token' });
    for (let i = 0; i < 100; i++) expect((await validate(i % 2 === 0 ? first : second)).status, `validation ${i + 1}`).toBe(401);
    assertRateLimited(await validate(first));
    assertRateLimited(await validate(second));
  });

  it('counts failed client authentications of one address at one client across two instances', async () => {
    const client = await makeClient(first);
    const ip = `2001:db8:${randomBytes(2).toString('hex')}:${randomBytes(1).toString('hex')}00::1`;
    const validate = (app: TestApp, secret: string) => app.http.post('/api/sso/validate',
      { client_id: client.client_id, client_secret: secret, token: 'not.a.token' }, { headers: { 'x-forwarded-for': ip } });
    for (let i = 0; i < 3; i++) expect((await validate(i % 2 === 0 ? first : second, 'wrong')).status, `failure ${i + 1}`).toBe(401);
    assertRefusedAddress(await validate(second, 'wrong'));
    assertRefusedAddress(await validate(first, 'wrong'));
    expect((await validate(first, client.client_secret)).status, 'the right secret is served (an invalid token)').toBe(401);
  });

  it('counts logins of one IP across two instances', async () => {
    // a random documentation-range IPv6 /56 through the trusted loopback proxy: a key no other run uses
    const ip = `2001:db8:${randomBytes(2).toString('hex')}:${randomBytes(1).toString('hex')}00::1`;
    const login = (app: TestApp) => app.http.post('/api/auth/login', { login: unique('nobody'), password: 'wrong' }, { headers: { 'x-forwarded-for': ip } });
    for (let i = 0; i < 10; i++) expect((await login(i < 5 ? first : second)).status, `attempt ${i + 1}`).toBe(401);
    assertRateLimited(await login(first));
    assertRateLimited(await login(second));
  });
});
