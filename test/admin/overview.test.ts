import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { signIn, totpCode } from '../auth/support.ts';
import { signedIn } from './support.ts';

describe('admin overview counts', () => {
  let app: TestApp;
  let admin: Awaited<ReturnType<typeof signedIn>>;
  beforeAll(async () => {
    app = await startTestApp();
    admin = await signedIn(app);
  });
  afterAll(() => app?.close());

  const stat = async (name: string) => {
    const res = await app.http.get('/admin', { headers: { cookie: admin.cookie, accept: 'text/html' } });
    expect(res.status).toBe(200);
    return Number(res.text.match(new RegExp(`data-stat="${name}">(\\d+)<`))?.[1]);
  };

  it('counts wrong passwords as failed sign-ins, not the password step of a two-factor sign-in or a must-change sign-in', async () => {
    const twoFactor = await makeUser(app);
    const { cookie } = await signIn(app, twoFactor.username, twoFactor.password);
    const setup = await app.http.post('/api/user/2fa/setup', undefined, { headers: { cookie: cookie! } });
    const enabled = await app.http.post('/api/user/2fa/enable', { code: await totpCode(setup.body.secret, -1), current_password: twoFactor.password }, { headers: { cookie: cookie! } });
    expect(enabled.status, enabled.text).toBe(200);
    const mustChange = await makeUser(app);
    expect((await app.http.patch(`/api/admin/users/${mustChange.id}`, { must_change_password: true }, admin.as)).status).toBe(200);

    const before = await stat('failed_logins_24h');
    const passwordStep = await app.http.post('/api/auth/login', { login: twoFactor.username, password: twoFactor.password });
    expect(passwordStep.body.error).toBe('totp_required');
    const changeFirst = await app.http.post('/api/auth/login', { login: mustChange.username, password: mustChange.password });
    expect(changeFirst.body.error).toBe('password_change_required');
    expect(await stat('failed_logins_24h'), 'right passwords are no failed sign-ins').toBe(before);

    expect((await app.http.post('/api/auth/login', { login: twoFactor.username, password: 'not the password' })).status).toBe(401);
    expect((await app.http.post('/api/auth/login', { login: twoFactor.username, password: twoFactor.password, totp: '000000' === (await totpCode(setup.body.secret)) ? '111111' : '000000' })).status).toBe(401);
    expect(await stat('failed_logins_24h'), 'a wrong password and a wrong code are').toBe(before + 2);
  });
});
