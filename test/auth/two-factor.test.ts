import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';
import { attemptRow, auditRows, deliveries, enrolledUser, signIn, subscribe, totpCode } from './support.ts';

describe('TOTP two-factor', () => {
  let app: TestApp;
  let webhookId: number;
  beforeAll(async () => {
    app = await startTestApp();
    webhookId = await subscribe(app, ['user.2fa_enabled', 'user.login']);
  });
  afterAll(() => app.close());

  it('enrolls: setup gives an otpauth URI and an SVG QR code; enable needs a valid code and returns ten recovery codes', async () => {
    const user = await makeUser(app);
    const { cookie } = await signIn(app, user.username, user.password);
    const headers = { cookie: cookie! };
    expect((await app.http.post('/api/user/2fa/setup')).status, 'only for a signed-in user').toBe(401);

    const setup = await app.http.post('/api/user/2fa/setup', undefined, { headers });
    expect(setup.status, setup.text).toBe(200);
    const uri = new URL(setup.body.otpauth_uri);
    expect(uri.protocol).toBe('otpauth:');
    expect(uri.host).toBe('totp');
    expect(uri.searchParams.get('secret')).toBe(setup.body.secret);
    expect(uri.searchParams.get('issuer')).toBe('auth-service');
    expect(setup.body.qr_svg).toMatch(/^<svg[\s\S]*<\/svg>\s*$/);
    expect(setup.headers['cache-control']).toBe('no-store');

    const wrong = await app.http.post('/api/user/2fa/enable', { code: '000000' === (await totpCode(setup.body.secret)) ? '111111' : '000000', current_password: user.password }, { headers });
    expect(wrong.status).toBe(400);
    expect(wrong.body.error).toBe('invalid_totp');
    const refused = (await auditRows(app, user.username)).filter((r) => r.action === 'user.2fa_enable' && r.outcome === 'failure');
    expect(refused.map((r) => r.details.reason), 'the refused code is audited').toStrictEqual(['invalid_totp']);
    expect((await app.http.post('/api/user/2fa/enable', {}, { headers })).body.error).toBe('validation_error');
    const noPassword = await app.http.post('/api/user/2fa/enable', { code: await totpCode(setup.body.secret) }, { headers });
    expect(noPassword.body.error, 'the current password is asked again').toBe('validation_error');
    const wrongPassword = await app.http.post('/api/user/2fa/enable', { code: await totpCode(setup.body.secret), current_password: 'not the password at all' }, { headers });
    expect(wrongPassword.status).toBe(401);
    expect(wrongPassword.body.error).toBe('invalid_credentials');
    expect(wrongPassword.body.attempts_remaining, 'counted toward the lock, after the refused code').toBe(3);
    expect((await app.db.query<{ totp_enabled: boolean }>('SELECT totp_enabled FROM users WHERE id = $1', [user.id])).rows[0].totp_enabled, 'still off').toBe(false);

    const enabled = await app.http.post('/api/user/2fa/enable', { code: await totpCode(setup.body.secret), current_password: user.password }, { headers });
    expect(enabled.status, enabled.text).toBe(200);
    expect(enabled.body.totp_enabled).toBe(true);
    const codes = enabled.body.recovery_codes as string[];
    expect(codes.length).toBe(10);
    expect(new Set(codes).size).toBe(10);

    const stored = await app.db.query<{ code_hash: string }>('SELECT code_hash FROM recovery_codes WHERE user_id = $1', [user.id]);
    expect(stored.rowCount).toBe(10);
    for (const row of stored.rows) expect(!codes.some((c) => row.code_hash.includes(c) || row.code_hash.includes(c.replace(/-/g, ''))), 'stored hashed').toBeTruthy();

    expect((await deliveries(app, webhookId, 'user.2fa_enabled')).filter((d) => d.user_id === user.id)).toStrictEqual([{ user_id: user.id, email: user.email }]);
    const actions = (await auditRows(app, user.username)).map((r) => r.action);
    expect(actions.includes('user.2fa_setup') && actions.includes('user.2fa_enable')).toBeTruthy();
    expect(JSON.stringify(await auditRows(app, user.username)), 'the secret is not audited').not.toMatch(new RegExp(setup.body.secret));

    const again = await app.http.post('/api/user/2fa/setup', undefined, { headers });
    expect(again.status).toBe(409);
    expect(again.body.error).toBe('totp_already_enabled');
  });

  it('the page asks for the current password to turn it on: a wrong one marks its field, warns before the lock, the fifth says it locked (401), then 423', async () => {
    const user = await makeUser(app);
    const browser = formSession(await app.listen());
    const login = await browser.get('/login');
    await browser.post('/login', { _csrf: hiddenField(login.text, '_csrf'), step: 'password', login: user.username, password: user.password });
    const csrf = hiddenField((await browser.get('/account/security')).text, '_csrf');
    await browser.post('/account/security/totp/setup', { _csrf: csrf });
    const secret = (await browser.get('/account/security')).text.match(/data-field="totp-secret"[^>]*>([^<]*)</)![1].replace(/\s+/g, '');
    const attempt = async () => browser.post('/account/security/totp/enable', { _csrf: csrf, current_password: 'not the password at all', code: await totpCode(secret) });
    const first = await attempt();
    expect(first.status).toBe(401);
    expect(first.text).toMatch(/id="enable-password"[^>]*aria-invalid="true"/);
    expect(first.text).toContain('The current password is wrong.');
    for (let i = 0; i < 2; i++) await attempt();
    const last = await attempt(); // the 4th: one left
    expect(last.text).toContain('The current password is wrong. One more failed attempt locks the account for 30 minutes.');
    const fifth = await attempt();
    expect(fifth.status).toBe(401);
    expect(fifth.text).toContain('The current password is wrong. Too many failed attempts: this account is now locked for 30 minutes.');
    const locked = await attempt();
    expect(locked.status).toBe(423);
    expect(locked.text).toMatch(/locked/);
    expect(locked.text).toMatch(/id="enable-password"[^>]*aria-invalid="true"/);
    expect((await app.db.query<{ totp_enabled: boolean }>('SELECT totp_enabled FROM users WHERE id = $1', [user.id])).rows[0].totp_enabled).toBe(false);
  });

  it('never turns on a secret the code was not checked against: a setup racing an enable is one or the other', async () => {
    for (let round = 0; round < 25; round++) {
      const user = await makeUser(app);
      const { cookie } = await signIn(app, user.username, user.password);
      const headers = { cookie: cookie! };
      const first = await app.http.post('/api/user/2fa/setup', undefined, { headers });
      const code = await totpCode(first.body.secret, -1);
      // the enable's password check takes bcrypt's time; setups land before, during and after its transaction
      const enabling = app.http.post('/api/user/2fa/enable', { code, current_password: user.password }, { headers });
      const setups = [0, 1, 2, 3, 5, 8].map((ms) => new Promise((r) => setTimeout(r, ms)).then(() => app.http.post('/api/user/2fa/setup', undefined, { headers })));
      const [enabled, ...others] = await Promise.all([enabling, ...setups]);
      if (enabled.status === 200) {
        // on with the first secret: no setup replaced it afterwards
        for (const r of others) expect(r.status === 200 ? `setup replaced the secret after enable: ${r.text}` : r.body.error).toBe('totp_already_enabled');
      } else {
        expect(enabled.body.error, enabled.text).toBe('invalid_totp');
      }
    }
  });

  it('refuses the login without the code, accepts it with the code, and refuses the same code a second time', async () => {
    const { user, secret } = await enrolledUser(app);
    const without = await app.http.post('/api/auth/login', { login: user.username, password: user.password });
    expect(without.status).toBe(401);
    expect(without.body.error).toBe('totp_required');

    const code = await totpCode(secret);
    const withCode = await app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: code });
    expect(withCode.status, withCode.text).toBe(200);
    expect(withCode.body.user.id).toBe(user.id);
    const event = (await deliveries(app, webhookId, 'user.login')).filter((d) => d.user_id === user.id).at(-1);
    expect(event['2fa_used']).toBe(true);

    const replay = await app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: code });
    expect(replay.status).toBe(401);
    expect(replay.body.error, 'a code already used is told apart from a wrong one').toBe('totp_reused');
    expect(replay.body.message).toMatch(/Wait for the next code/);

    const tokenWithout = await app.http.post('/api/login', { username: user.username, password: user.password });
    expect(tokenWithout.body.error, 'the token login needs the code too').toBe('totp_required');
    const tokenWith = await app.http.post('/api/login', { username: user.username, password: user.password, totp: await totpCode(secret, 1) });
    expect(tokenWith.status, tokenWith.text).toBe(200);
  });

  it('does not reveal the second step to a wrong password', async () => {
    const { user, secret } = await enrolledUser(app);
    const r = await app.http.post('/api/auth/login', { login: user.username, password: 'wrong', totp: await totpCode(secret) });
    expect(r.status).toBe(401);
    expect(r.body.error).toBe('invalid_credentials');
  });

  it('accepts a recovery code once', async () => {
    const { user, recoveryCodes } = await enrolledUser(app);
    const code = recoveryCodes[3];
    const first = await app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: code.toUpperCase() });
    expect(first.status, first.text).toBe(200);
    const second = await app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: code });
    expect(second.status).toBe(401);
    expect(second.body.error).toBe('invalid_totp');
    const another = await app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: recoveryCodes[4] });
    expect(another.status, 'the other codes still work').toBe(200);
  });

  it('counts wrong codes toward the lockout', async () => {
    const { user, secret } = await enrolledUser(app);
    for (let i = 0; i < 4; i++) {
      const r = await app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: `99999${i}` });
      expect(r.status).toBe(401);
      expect(r.body.error).toBe('invalid_totp');
      expect(r.body.attempts_remaining).toBe(4 - i);
    }
    const fifth = await app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: '999994' });
    expect([fifth.status, fifth.body.error], 'the fifth wrong code is refused as a wrong code (401)').toStrictEqual([401, 'invalid_totp']);
    expect(fifth.body, 'and says that it locked the account').toMatchObject({ locked: true, remaining_minutes: 30, attempts_remaining: 0 });
    expect((await attemptRow(app, user.username))?.failed_count).toBe(5);
    const locked = await app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: await totpCode(secret) });
    expect(locked.status).toBe(423);
    expect(locked.body.remaining_minutes).toBe(30);
  });

  it('is turned off with a valid code, after which the password alone signs in', async () => {
    const { user, secret, headers, recoveryCodes } = await enrolledUser(app);
    const wrong = await app.http.post('/api/user/2fa/disable', { code: '12345' }, { headers });
    expect(wrong.status).toBe(400);
    expect(wrong.body.error).toBe('invalid_totp');
    const off = await app.http.post('/api/user/2fa/disable', { code: await totpCode(secret) }, { headers });
    expect(off.status, off.text).toBe(200);
    expect(off.body).toStrictEqual({ totp_enabled: false });
    expect((await app.db.query('SELECT 1 FROM recovery_codes WHERE user_id = $1', [user.id])).rowCount).toBe(0);
    const login = await app.http.post('/api/auth/login', { login: user.username, password: user.password });
    expect(login.status, login.text).toBe(200);
    expect((await app.http.post('/api/user/2fa/disable', { code: recoveryCodes[0] }, { headers })).body.error).toBe('totp_not_enabled');
    expect((await auditRows(app, user.username)).some((r) => r.action === 'user.2fa_disable')).toBeTruthy();
  });

  it('can be turned off with a recovery code', async () => {
    const { headers, recoveryCodes } = await enrolledUser(app);
    const off = await app.http.post('/api/user/2fa/disable', { code: recoveryCodes[9] }, { headers });
    expect(off.status, off.text).toBe(200);
  });

  it('audits a refused code when turning it off or making new recovery codes, on the API and the page, and counts it toward the lock', async () => {
    const { user, secret, headers } = await enrolledUser(app);
    const api = await app.http.post('/api/user/2fa/disable', { code: 'aaaaa-bbbbb-ccccc-ddddd' }, { headers });
    expect([api.body.error, api.body.attempts_remaining], 'the answer says how many attempts are left, as a sign-in does').toStrictEqual(['invalid_totp', 4]);

    const page = formSession(app.app);
    page.cookies.set('auth.sid', headers.cookie.slice('auth.sid='.length));
    const csrf = hiddenField((await page.get('/account/security')).text, '_csrf');
    const off = await page.post('/account/security/totp/disable', { _csrf: csrf, code: '000000' === (await totpCode(secret)) ? '111111' : '000000' });
    expect(off.status).toBe(400);
    const wrong = await page.post('/account/security/recovery-codes', { _csrf: csrf, code: 'aaaaa-bbbbb-ccccc-ddddd' });
    expect(wrong.status).toBe(400);
    const code = await totpCode(secret);
    await app.services.auth.twoFactor.regenerateRecoveryCodes(user, code, { ipAddress: '127.0.0.1', userAgent: null });
    const reused = await page.post('/account/security/recovery-codes', { _csrf: csrf, code });
    expect(reused.text).toContain('That code was already used.');
    expect(reused.text, 'the fourth refusal warns before the lock').toContain('One more failed attempt locks the account for 30 minutes.');
    const fifth = await app.http.post('/api/user/2fa/disable', { code }, { headers });
    expect([fifth.status, fifth.body.error, fifth.body.locked], 'the fifth is refused as itself, and locks').toStrictEqual([400, 'totp_reused', true]);

    const failures = (await auditRows(app, user.username)).filter((r) => r.outcome === 'failure');
    expect(failures.map((r) => [r.action, r.details.reason])).toStrictEqual([
      ['user.2fa_disable', 'invalid_totp'],
      ['user.2fa_disable', 'invalid_totp'],
      ['user.2fa_recovery_codes', 'invalid_totp'],
      ['user.2fa_recovery_codes', 'totp_reused'],
      ['user.2fa_disable', 'totp_reused'],
    ]);
    for (const r of failures) expect(r.ip_address).toBeTruthy();
    expect((await attemptRow(app, user.username))?.failed_count, 'each refusal counts as a failed sign-in would').toBe(5);
    expect((await app.db.query<{ totp_enabled: boolean }>('SELECT totp_enabled FROM users WHERE id = $1', [user.id])).rows[0].totp_enabled).toBe(true);
  });
  it('locks the name after LOCKOUT_THRESHOLD refused codes on a signed-in session: the last is refused as itself and says so, then even the right code gets 423 and two-factor stays on', async () => {
    const { user, secret, headers } = await enrolledUser(app);
    const wrong = async () => ('000000' === (await totpCode(secret)) ? '111111' : '000000');
    for (let i = 1; i <= 3; i++) {
      const r = await app.http.post('/api/user/2fa/disable', { code: await wrong() }, { headers });
      expect([r.status, r.body.error, r.body.attempts_remaining], r.text).toStrictEqual([400, 'invalid_totp', 5 - i]);
      expect(r.body.message).not.toMatch(/locks/);
    }
    // the attempt before the lock warns, as a sign-in's does: here on the page's form
    const warnPage = formSession(app.app);
    warnPage.cookies.set('auth.sid', headers.cookie.slice('auth.sid='.length));
    const warnCsrf = hiddenField((await warnPage.get('/account/security')).text, '_csrf');
    const fourth = await warnPage.post('/account/security/totp/disable', { _csrf: warnCsrf, code: await wrong() });
    expect(fourth.status).toBe(400);
    expect(fourth.text).toContain('That code is not valid. Check your authenticator app (or the recovery code) and try again. One more failed attempt locks the account for 30 minutes.');
    const fifth = await app.http.post('/api/user/2fa/disable', { code: await wrong() }, { headers });
    expect([fifth.status, fifth.body.error, fifth.body.locked, fifth.body.remaining_minutes], fifth.text).toStrictEqual([400, 'invalid_totp', true, 30]);
    expect(fifth.body.message).toMatch(/now locked/);
    const right = await app.http.post('/api/user/2fa/disable', { code: await totpCode(secret) }, { headers });
    expect([right.status, right.body.error], 'no code is checked while locked').toStrictEqual([423, 'account_locked']);
    const page = formSession(app.app);
    page.cookies.set('auth.sid', headers.cookie.slice('auth.sid='.length));
    const csrf = hiddenField((await page.get('/account/security')).text, '_csrf');
    const codes = await page.post('/account/security/recovery-codes', { _csrf: csrf, code: await totpCode(secret) });
    expect(codes.status, 'no recovery codes are made while locked').toBe(423);
    expect((await app.db.query<{ totp_enabled: boolean }>('SELECT totp_enabled FROM users WHERE id = $1', [user.id])).rows[0].totp_enabled).toBe(true);
    const locked = (await auditRows(app, user.username)).filter((r) => r.action === 'user.locked');
    expect(locked.map((r) => r.details.via)).toStrictEqual(['two_factor']);
    expect((await signIn(app, user.username, user.password, { totp: await totpCode(secret) })).res.status, 'sign-ins are locked too').toBe(423);
  });
});
