import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, unique, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';

/**
 * SPEC.md §8: "Authentication (login endpoints) | 10 requests per minute | per IP address".
 * DESIGN.md: "login endpoints (`POST /api/auth/login`, `POST /api/login`, `POST /sso/login`) 10/min per IP".
 */
/**
 * SPEC §8: the login limit is per IP address. An IPv6 address is counted by its /64, the
 * block one host or network is given; express-rate-limit's default, a /56, made every host of a
 * cloud network share one budget (found by a review helper).
 */
describe('the login limit is per IP address', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ RATE_LIMIT_LOGIN_PER_MIN: '2', RATE_LIMIT_CLIENT_AUTH_FAILURES_PER_MIN: '2', TRUST_PROXY: 'loopback' });
  });
  afterAll(() => app.close());

  it('gives IPv6 hosts in different /64s their own budgets, and one /64 one budget', async () => {
    const prefix = `2001:db8:${randomBytes(2).toString('hex')}`;
    const login = (ip: string) => app.http.post('/api/auth/login', { login: unique('nobody'), password: 'wrong' }, { headers: { 'x-forwarded-for': ip } });
    // two hosts in different /64 networks (e.g. two servers of one site or one cloud VPC)
    const a = `${prefix}:1::10`;
    const b = `${prefix}:2::20`;
    expect((await login(a)).status).toBe(401);
    expect((await login(a)).status).toBe(401);
    expect((await login(a)).status, 'a is over its own budget').toBe(429);
    const fromB = await login(b);
    expect(fromB.status, `b has sent nothing yet: ${fromB.text}`).toBe(401);
    // another address of a's /64 is a's budget: a host cannot step around the limit
    expect((await login(`${prefix}:1::11`)).status).toBe(429);
  });

  it('counts a forwarded hop written with a port (ip:port, [v6]:port, as some proxies write them) as its address, whatever the port', async () => {
    const v4 = `203.0.113.${1 + randomBytes(1)[0] % 250}`;
    const v6 = `2001:db8:${randomBytes(2).toString('hex')}::7`;
    for (const hops of [[`${v4}:40001`, `${v4}:40002`, `${v4}:40003`], [`[${v6}]:40001`, `[${v6}]:40002`, `[${v6}]`]]) {
      const login = (hop: string) => app.http.post('/api/auth/login', { login: unique('nobody'), password: 'wrong' }, { headers: { 'x-forwarded-for': hop } });
      expect((await login(hops[0])).status).toBe(401);
      expect((await login(hops[1])).status).toBe(401);
      expect((await login(hops[2])).status, `the third login of one address in a minute (limit 2): ${hops.join(', ')}`).toBe(429);
    }
  });

  it('counts failed client authentications of IPv6 callers by their /64 too', async () => {
    const client = await makeClient(app, { allowedIps: ['2001:db8::/32', '127.0.0.1'] });
    const user = await makeUser(app);
    const prefix = `2001:db8:${randomBytes(2).toString('hex')}`;
    const issue = (ip: string, secret: string) => app.http.post('/api/sso/token',
      { client_id: client.client_id, client_secret: secret, username: user.username }, { headers: { 'x-forwarded-for': ip } });
    expect((await issue(`${prefix}:1::10`, 'wrong')).status).toBe(401);
    expect((await issue(`${prefix}:1::11`, 'wrong')).status).toBe(401);
    expect((await issue(`${prefix}:1::12`, 'wrong')).status, 'the third failure of that /64').toBe(429);
    expect((await issue(`${prefix}:1::13`, 'wrong')).status, 'the /64 is refused').toBe(429);
    expect((await issue(`${prefix}:1::13`, client.client_secret)).status, 'the right secret is served').toBe(200);
    expect((await issue(`${prefix}:2::10`, 'wrong')).status, 'another /64 is not refused').toBe(401);
  });
});
