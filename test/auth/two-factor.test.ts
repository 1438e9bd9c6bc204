import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { attemptRow, auditRows, deliveries, signIn, subscribe, totpCode } from './support.ts';

describe('TOTP two-factor', () => {
  let app: TestApp;
  let webhookId: number;
  before(async () => {
    app = await startTestApp();
    webhookId = await subscribe(app, ['user.2fa_enabled', 'user.login']);
  });
  after(() => app.close());

  /** A user with two-factor on; the enabling code used the previous time step, so the current one is still fresh. */
  async function enrolledUser() {
    const user = await makeUser(app);
    const { cookie } = await signIn(app, user.username, user.password);
    const headers = { cookie: cookie! };
    const setup = await app.http.post('/api/user/2fa/setup', undefined, { headers });
    assert.equal(setup.status, 200, setup.text);
    const secret = setup.body.secret as string;
    const enabled = await app.http.post('/api/user/2fa/enable', { code: await totpCode(secret, -1) }, { headers });
    assert.equal(enabled.status, 200, enabled.text);
    return { user, secret, headers, setup: setup.body, recoveryCodes: enabled.body.recovery_codes as string[] };
  }

  it('enrolls: setup gives an otpauth URI and an SVG QR code; enable needs a valid code and returns ten recovery codes', async () => {
    const user = await makeUser(app);
    const { cookie } = await signIn(app, user.username, user.password);
    const headers = { cookie: cookie! };
    assert.equal((await app.http.post('/api/user/2fa/setup')).status, 401, 'only for a signed-in user');

    const setup = await app.http.post('/api/user/2fa/setup', undefined, { headers });
    assert.equal(setup.status, 200, setup.text);
    const uri = new URL(setup.body.otpauth_uri);
    assert.equal(uri.protocol, 'otpauth:');
    assert.equal(uri.host, 'totp');
    assert.equal(uri.searchParams.get('secret'), setup.body.secret);
    assert.equal(uri.searchParams.get('issuer'), 'auth-service');
    assert.match(setup.body.qr_svg, /^<svg[\s\S]*<\/svg>\s*$/);
    assert.equal(setup.headers['cache-control'], 'no-store');

    const wrong = await app.http.post('/api/user/2fa/enable', { code: '000000' === (await totpCode(setup.body.secret)) ? '111111' : '000000' }, { headers });
    assert.equal(wrong.status, 400);
    assert.equal(wrong.body.error, 'invalid_totp');
    assert.equal((await app.http.post('/api/user/2fa/enable', {}, { headers })).body.error, 'validation_error');

    const enabled = await app.http.post('/api/user/2fa/enable', { code: await totpCode(setup.body.secret) }, { headers });
    assert.equal(enabled.status, 200, enabled.text);
    assert.equal(enabled.body.totp_enabled, true);
    const codes = enabled.body.recovery_codes as string[];
    assert.equal(codes.length, 10);
    assert.equal(new Set(codes).size, 10);

    const stored = await app.db.query<{ code_hash: string }>('SELECT code_hash FROM recovery_codes WHERE user_id = $1', [user.id]);
    assert.equal(stored.rowCount, 10);
    for (const row of stored.rows) assert.ok(!codes.some((c) => row.code_hash.includes(c) || row.code_hash.includes(c.replace(/-/g, ''))), 'stored hashed');

    assert.deepEqual((await deliveries(app, webhookId, 'user.2fa_enabled')).filter((d) => d.user_id === user.id), [{ user_id: user.id, email: user.email }]);
    const actions = (await auditRows(app, user.username)).map((r) => r.action);
    assert.ok(actions.includes('user.2fa_setup') && actions.includes('user.2fa_enable'));
    assert.doesNotMatch(JSON.stringify(await auditRows(app, user.username)), new RegExp(setup.body.secret), 'the secret is not audited');

    const again = await app.http.post('/api/user/2fa/setup', undefined, { headers });
    assert.equal(again.status, 409);
    assert.equal(again.body.error, 'totp_already_enabled');
  });

  it('refuses the login without the code, accepts it with the code, and refuses the same code a second time', async () => {
    const { user, secret } = await enrolledUser();
    const without = await app.http.post('/api/auth/login', { login: user.username, password: user.password });
    assert.equal(without.status, 401);
    assert.equal(without.body.error, 'totp_required');

    const code = await totpCode(secret);
    const withCode = await app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: code });
    assert.equal(withCode.status, 200, withCode.text);
    assert.equal(withCode.body.user.id, user.id);
    const event = (await deliveries(app, webhookId, 'user.login')).filter((d) => d.user_id === user.id).at(-1);
    assert.equal(event['2fa_used'], true);

    const replay = await app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: code });
    assert.equal(replay.status, 401);
    assert.equal(replay.body.error, 'invalid_totp');

    const tokenWithout = await app.http.post('/api/login', { username: user.username, password: user.password });
    assert.equal(tokenWithout.body.error, 'totp_required', 'the token login needs the code too');
    const tokenWith = await app.http.post('/api/login', { username: user.username, password: user.password, totp: await totpCode(secret, 1) });
    assert.equal(tokenWith.status, 200, tokenWith.text);
  });

  it('does not reveal the second step to a wrong password', async () => {
    const { user, secret } = await enrolledUser();
    const r = await app.http.post('/api/auth/login', { login: user.username, password: 'wrong', totp: await totpCode(secret) });
    assert.equal(r.status, 401);
    assert.equal(r.body.error, 'invalid_credentials');
  });

  it('accepts a recovery code once', async () => {
    const { user, recoveryCodes } = await enrolledUser();
    const code = recoveryCodes[3];
    const first = await app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: code.toUpperCase() });
    assert.equal(first.status, 200, first.text);
    const second = await app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: code });
    assert.equal(second.status, 401);
    assert.equal(second.body.error, 'invalid_totp');
    const another = await app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: recoveryCodes[4] });
    assert.equal(another.status, 200, 'the other codes still work');
  });

  it('counts wrong codes toward the lockout', async () => {
    const { user, secret } = await enrolledUser();
    for (let i = 0; i < 5; i++) {
      const r = await app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: `99999${i}` });
      assert.equal(r.status, 401);
      assert.equal(r.body.error, 'invalid_totp');
    }
    assert.equal((await attemptRow(app, user.username))?.failed_count, 5);
    const locked = await app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: await totpCode(secret) });
    assert.equal(locked.status, 423);
    assert.equal(locked.body.remaining_minutes, 30);
  });

  it('is turned off with a valid code, after which the password alone signs in', async () => {
    const { user, secret, headers, recoveryCodes } = await enrolledUser();
    const wrong = await app.http.post('/api/user/2fa/disable', { code: '12345' }, { headers });
    assert.equal(wrong.status, 400);
    assert.equal(wrong.body.error, 'invalid_totp');
    const off = await app.http.post('/api/user/2fa/disable', { code: await totpCode(secret) }, { headers });
    assert.equal(off.status, 200, off.text);
    assert.deepEqual(off.body, { totp_enabled: false });
    assert.equal((await app.db.query('SELECT 1 FROM recovery_codes WHERE user_id = $1', [user.id])).rowCount, 0);
    const login = await app.http.post('/api/auth/login', { login: user.username, password: user.password });
    assert.equal(login.status, 200, login.text);
    assert.equal((await app.http.post('/api/user/2fa/disable', { code: recoveryCodes[0] }, { headers })).body.error, 'totp_not_enabled');
    assert.ok((await auditRows(app, user.username)).some((r) => r.action === 'user.2fa_disable'));
  });

  it('can be turned off with a recovery code', async () => {
    const { headers, recoveryCodes } = await enrolledUser();
    const off = await app.http.post('/api/user/2fa/disable', { code: recoveryCodes[9] }, { headers });
    assert.equal(off.status, 200, off.text);
  });
});
