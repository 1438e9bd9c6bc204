import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { holdLocks, waitForLockWaiters } from '../helpers/locks.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';
import { enrolledUser, totpCode } from './support.ts';
import { hashRecoveryCode } from '../../src/auth/totp.ts';

describe('changes a two-factor code proves, at once with each other and with the sign-in lock', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());

  it.runIf(onPostgres)('two "new recovery codes" forms at once (one confirmed with a TOTP code, one with a recovery code) never answer 500', async () => {
    const { user, secret, headers, recoveryCodes } = await enrolledUser(app);
    const page = formSession(app.app);
    page.cookies.set('auth.sid', headers.cookie.slice('auth.sid='.length));
    const csrf = hiddenField((await page.get('/account/security')).text, '_csrf');
    const rows = (await app.db.query<{ id: number; code_hash: string }>('SELECT id, code_hash FROM recovery_codes WHERE user_id = $1 ORDER BY id', [user.id])).rows;
    expect(rows.length).toBe(10);
    const lastCode = recoveryCodes.find((c) => hashRecoveryCode(c) === rows[9].code_hash)!;
    // holding the first code's row stops both replacements at their DELETE, in order
    const release = await holdLocks(app.db, 'SELECT 1 FROM recovery_codes WHERE id = $1 FOR UPDATE', [rows[0].id]);
    const withTotp = page.post('/account/security/recovery-codes', { _csrf: csrf, code: await totpCode(secret) });
    await waitForLockWaiters(app.db, 1);
    const withRecovery = page.post('/account/security/recovery-codes', { _csrf: csrf, code: lastCode });
    await waitForLockWaiters(app.db, 2);
    await release();
    const answers = await Promise.all([withTotp, withRecovery]);
    const deadlocks = (await app.db.query<{ n: string }>('SELECT deadlocks AS n FROM pg_stat_database WHERE datname = current_database()')).rows[0].n;
    expect(answers.map((a) => a.status), `deadlocks detected in this database: ${deadlocks}`).not.toContain(500);
  });

  it.runIf(onPostgres)('a right code checked after the name was locked does not turn two-factor off (as the sign-in refuses it)', async () => {
    const { user, secret, headers } = await enrolledUser(app);
    // the disable's claim of the code's time step waits here (a NO KEY UPDATE lets the sign-in failures' audit rows refer to the user)
    const release = await holdLocks(app.db, 'SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE', [user.id]);
    const disabling = app.http.post('/api/user/2fa/disable', { code: await totpCode(secret) }, { headers });
    await waitForLockWaiters(app.db, 1);
    // meanwhile, five wrong passwords lock the name
    for (let i = 0; i < 5; i++) await app.http.post('/api/auth/login', { login: user.username, password: `wrong password ${i}` });
    const locked = await app.http.post('/api/auth/login', { login: user.username, password: user.password, totp: await totpCode(secret, 1) });
    expect(locked.status, 'the name is locked now').toBe(423);
    await release();
    const disabled = await disabling;
    const state = (await app.db.query<{ totp_enabled: boolean }>('SELECT totp_enabled FROM users WHERE id = $1', [user.id])).rows[0];
    expect([disabled.status, state.totp_enabled], `answer ${disabled.text}`).toStrictEqual([423, true]);
  });

  it.runIf(onPostgres)('a burst of refused codes on a signed-in session is checked no more than LOCKOUT_THRESHOLD times per lock', async () => {
    const { user, secret, headers } = await enrolledUser(app);
    await app.db.query('INSERT INTO login_attempts (login, failed_count) VALUES ($1, 0)', [user.username]);
    // the refusals are counted after their codes were checked: holding the counter lets the burst arrive together
    const release = await holdLocks(app.db, 'SELECT 1 FROM login_attempts WHERE login = $1 FOR UPDATE', [user.username]);
    const right = await totpCode(secret);
    const guesses = Array.from({ length: 20 }, (_, i) => String(100000 + i * 7919)).filter((g) => g !== right).slice(0, 15);
    const sent = guesses.map((code) => app.http.post('/api/user/2fa/disable', { code }, { headers }));
    await waitForLockWaiters(app.db, guesses.length);
    await release();
    const answers = await Promise.all(sent);
    // the refusal that sets the lock is a refused code too (400, `locked: true`); the rest are 423
    const checked = answers.filter((a) => a.status === 400 && a.body.error === 'invalid_totp').length;
    expect(checked, `statuses ${answers.map((a) => a.status)}`).toBeLessThanOrEqual(5);
    expect(answers.filter((a) => a.body.locked === true).length, 'one refusal set the lock').toBeLessThanOrEqual(1);
  });

  it('while the name is locked a change is refused before its code is checked, and the refusal is audited', async () => {
    const { user, secret, headers } = await enrolledUser(app);
    for (let i = 0; i < 5; i++) await app.http.post('/api/auth/login', { login: user.username, password: `wrong password ${i}` });
    const disabled = await app.http.post('/api/user/2fa/disable', { code: await totpCode(secret) }, { headers });
    expect(disabled.status, disabled.text).toBe(423);
    expect(disabled.body).toMatchObject({ error: 'account_locked' });
    const state = (await app.db.query<{ totp_enabled: boolean; totp_last_step: string | null }>('SELECT totp_enabled, totp_last_step FROM users WHERE id = $1', [user.id])).rows[0];
    expect(state.totp_enabled, 'two-factor stays on').toBe(true);
    const audit = (await app.db.query<{ outcome: string; details: any }>("SELECT outcome, details FROM audit_log WHERE action = 'user.2fa_disable' AND user_id = $1", [user.id])).rows;
    expect(audit).toEqual([{ outcome: 'failure', details: { reason: 'account_locked' } }]);
  });
});
