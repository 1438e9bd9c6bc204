import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashResetToken } from '../../src/auth/password-service.ts';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { formSession, hiddenField } from '../pages/form-session.ts';
import { auditRows, signIn } from '../auth/support.ts';
import { eventually, resetToken, startSmtpServer } from './smtp.ts';

const NEW_PASSWORD = 'four unrelated words here';

describe('password reset by email (a real SMTP server)', () => {
  let app: TestApp;
  let smtp: Awaited<ReturnType<typeof startSmtpServer>>;
  beforeAll(async () => {
    smtp = await startSmtpServer();
    app = await startTestApp({ SMTP_URL: smtp.url, MAIL_FROM: 'Auth <auth@example.test>', PUBLIC_URL: 'https://sso.example.test', PASSWORD_RESET_TTL: '15m' });
  });
  afterAll(async () => {
    await app?.close();
    await smtp?.close();
  });

  /** Asks for a reset of `login` and returns the token of the message that arrives at `email`. */
  async function mailedToken(login: string, email: string): Promise<string> {
    const before = smtp.to(email).length;
    const asked = await app.http.post('/api/auth/password/forgot', { login });
    expect(asked.status, asked.text).toBe(202);
    const mail = await eventually(() => smtp.to(email)[before], `a reset message to ${email}`);
    return resetToken(mail);
  }

  it('answers an unknown name and a known one identically, and mails only the known account', async () => {
    const user = await makeUser(app);
    const nobody = unique('nobody');
    const answers = [
      await app.http.post('/api/auth/password/forgot', { login: nobody }),
      await app.http.post('/api/auth/password/forgot', { login: user.username }),
    ];
    for (const a of answers) {
      expect(a.status).toBe(202);
      expect(a.text).toBe('{"success":true}');
    }
    const headerNames = answers.map((a) => Object.keys(a.headers).filter((h) => !['date', 'x-request-id'].includes(h)).sort());
    expect(headerNames[0]).toStrictEqual(headerNames[1]);
    expect(answers[0].headers['cache-control']).toBe(answers[1].headers['cache-control']);

    const mail = await eventually(() => smtp.to(user.email)[0], 'the reset message');
    expect(mail.from).toBe('auth@example.test');
    expect(mail.text).toContain('Subject: Reset your password');
    expect(mail.text).toMatch(/https:\/\/sso\.example\.test\/reset-password\?token=[A-Za-z0-9_-]{43}/);
    const unknownAudit = await eventually(async () => (await auditRows(app, nobody)).find((r) => r.action === 'user.password_reset_request'), 'the unknown name audited');
    expect([unknownAudit.outcome, unknownAudit.details.reason]).toStrictEqual(['failure', 'unknown_user']);
    expect(smtp.messages.filter((m) => m.text.includes(nobody))).toStrictEqual([]);
  });

  it('finds the account by its email address too, and stores only a hash of the token', async () => {
    const user = await makeUser(app);
    const token = await mailedToken(user.email.toUpperCase(), user.email);
    const rows = await app.db.query<{ token_hash: string; ttl: number }>(
      'SELECT token_hash, EXTRACT(EPOCH FROM (expires_at - created_at))::int AS ttl FROM password_resets WHERE user_id = $1', [user.id]);
    expect(rows.rows.length).toBe(1);
    expect(rows.rows[0].token_hash).not.toContain(token);
    expect(rows.rows[0].ttl, 'PASSWORD_RESET_TTL=15m').toBe(900);
  });

  it('resets the password with the emailed link once and only once', async () => {
    const user = await makeUser(app);
    const token = await mailedToken(user.username, user.email);
    const done = await app.http.post('/api/auth/password/reset', { token, new_password: NEW_PASSWORD });
    expect(done.status).toBe(200);
    expect(done.body).toStrictEqual({ success: true });
    expect((await signIn(app, user.username, user.password)).res.status).toBe(401);
    expect((await signIn(app, user.username, NEW_PASSWORD)).res.status).toBe(200);

    const again = await app.http.post('/api/auth/password/reset', { token, new_password: 'yet another long passphrase' });
    expect(again.status).toBe(400);
    expect(again.body.error).toBe('invalid_reset_token');
    expect((await signIn(app, user.username, NEW_PASSWORD)).res.status).toBe(200);
    const audited = (await auditRows(app, user.username)).map((r) => r.action);
    expect(audited).toContain('user.password_reset');
    expect(JSON.stringify(await auditRows(app, user.username))).not.toContain(token);
  });

  it('refuses a used-up race: two concurrent resets with one link, one wins', async () => {
    const user = await makeUser(app);
    const token = await mailedToken(user.username, user.email);
    const both = await Promise.all([
      app.http.post('/api/auth/password/reset', { token, new_password: NEW_PASSWORD }),
      app.http.post('/api/auth/password/reset', { token, new_password: 'a different long passphrase' }),
    ]);
    expect(both.map((r) => r.status).sort()).toStrictEqual([200, 400]);
  });

  it('uses one of several valid links at once: one 200, the others 400, never a deadlock\'s 500', async () => {
    for (let round = 0; round < 5; round++) {
      const user = await makeUser(app);
      // four live links of one user (the mail's pace, PASSWORD_RESET_INTERVAL, is not what is tested here)
      const tokens = Array.from({ length: 4 }, () => randomBytes(32).toString('base64url'));
      for (const token of tokens) {
        await app.db.query("INSERT INTO password_resets (user_id, token_hash, expires_at) VALUES ($1, $2, now() + interval '15 minutes')", [user.id, hashResetToken(token)]);
      }
      const answers = await Promise.all(tokens.map((token, i) => app.http.post('/api/auth/password/reset', { token, new_password: `${NEW_PASSWORD} ${i}` })));
      expect(answers.map((r) => r.status).sort(), answers.map((r) => r.text).join('\n')).toStrictEqual([200, 400, 400, 400]);
      for (const r of answers.filter((a) => a.status === 400)) expect(r.body.error).toBe('invalid_reset_token');
    }
  });

  it('refuses the link after its lifetime', async () => {
    const user = await makeUser(app);
    const token = await mailedToken(user.username, user.email);
    // the lifetime has passed: the row's expiry is now in the past
    await app.db.query("UPDATE password_resets SET expires_at = now() - interval '1 second' WHERE user_id = $1", [user.id]);
    const late = await app.http.post('/api/auth/password/reset', { token, new_password: NEW_PASSWORD });
    expect(late.status).toBe(400);
    expect(late.body.error).toBe('invalid_reset_token');
    expect((await signIn(app, user.username, user.password)).res.status).toBe(200);
  });

  it('sends one mail per PASSWORD_RESET_INTERVAL: a request sooner sends nothing and kills no link', async () => {
    const user = await makeUser(app);
    const first = await mailedToken(user.username, user.email);
    for (let i = 0; i < 3; i++) expect((await app.http.post('/api/auth/password/forgot', { login: user.username })).status).toBe(202);
    const refused = await eventually(async () => {
      const rows = (await auditRows(app, user.username)).filter((r) => r.action === 'user.password_reset_request' && r.outcome === 'failure');
      return rows.length === 3 ? rows : undefined;
    }, 'three requests refused');
    expect(refused.map((r) => r.details.reason)).toStrictEqual(['recently_sent', 'recently_sent', 'recently_sent']);
    expect(smtp.to(user.email).length, 'one mail').toBe(1);
    expect((await app.http.post('/api/auth/password/reset', { token: 'x'.repeat(43), new_password: NEW_PASSWORD })).body.error).toBe('invalid_reset_token');
    expect((await app.http.post('/api/auth/password/reset', { token: first, new_password: NEW_PASSWORD })).status, 'the mailed link still works').toBe(200);
  });

  it('after the interval a request sends a new link; the older one keeps working until either is used', async () => {
    const user = await makeUser(app);
    const first = await mailedToken(user.username, user.email);
    await app.db.query("UPDATE password_resets SET created_at = created_at - interval '2 minutes' WHERE user_id = $1", [user.id]);
    const second = await mailedToken(user.username, user.email);
    expect(second).not.toBe(first);
    expect((await app.db.query('SELECT 1 FROM password_resets WHERE user_id = $1', [user.id])).rowCount).toBe(2);
    expect((await app.http.post('/api/auth/password/reset', { token: first, new_password: NEW_PASSWORD })).status).toBe(200);
    expect((await app.http.post('/api/auth/password/reset', { token: second, new_password: 'another long passphrase' })).body.error, 'using one kills the other')
      .toBe('invalid_reset_token');
  });

  it('kills the links mailed to an address when an administrator changes it', async () => {
    const user = await makeUser(app);
    const token = await mailedToken(user.username, user.email);
    await app.services.users.updateProfile(user.id, { email: `moved-${user.email}` }, { via: 'cli', username: 'test' });
    expect((await app.http.post('/api/auth/password/reset', { token, new_password: NEW_PASSWORD })).body.error).toBe('invalid_reset_token');
    expect((await signIn(app, user.username, user.password)).res.status, 'the password is unchanged').toBe(200);
  });

  it('kills an unused link when the password changes', async () => {
    const user = await makeUser(app);
    const token = await mailedToken(user.username, user.email);
    const { cookie } = await signIn(app, user.username, user.password);
    const changed = await app.http.post('/api/user/password', { current_password: user.password, new_password: NEW_PASSWORD }, { headers: { cookie: cookie! } });
    expect(changed.status).toBe(200);
    expect((await app.http.post('/api/auth/password/reset', { token, new_password: 'another long passphrase' })).body.error).toBe('invalid_reset_token');
  });

  it('refuses a weak new password and leaves the link usable', async () => {
    const user = await makeUser(app);
    const token = await mailedToken(user.username, user.email);
    for (const weak of ['short', 'password1234', user.username, user.email]) {
      const r = await app.http.post('/api/auth/password/reset', { token, new_password: weak });
      expect(r.status, weak).toBe(400);
      expect(r.body.error).toBe('invalid_password');
      expect(r.body.message.length > 10).toBeTruthy();
    }
    expect((await app.http.post('/api/auth/password/reset', { token, new_password: NEW_PASSWORD })).status).toBe(200);
  });

  it('a reset unlocks a locked account, ends its sessions and invalidates its unused SSO tokens', async () => {
    const user = await makeUser(app);
    const client = await makeClient(app);
    const { cookie } = await signIn(app, user.username, user.password);
    const issued = await app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username: user.username });
    expect(issued.status).toBe(200);
    for (let i = 0; i < app.config.LOCKOUT_THRESHOLD; i++) await signIn(app, user.username, 'not the password');
    expect((await signIn(app, user.username, user.password)).res.status).toBe(423);

    const token = await mailedToken(user.username, user.email);
    expect((await app.http.post('/api/auth/password/reset', { token, new_password: NEW_PASSWORD })).status).toBe(200);
    expect((await signIn(app, user.username, NEW_PASSWORD)).res.status, 'unlocked').toBe(200);
    expect((await app.http.get('/api/user', { headers: { cookie: cookie! } })).status, 'the old session ended').toBe(401);
    const validated = await app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token: issued.body.token });
    expect(validated.body).toMatchObject({ valid: false, error: 'token_revoked' });
    const logout = (await auditRows(app, user.username)).find((r) => r.action === 'user.logout');
    expect(logout?.details).toMatchObject({ reason: 'password_reset', ended_sessions: 1, invalidated_tokens: 1 });
  });

  it('the pages: a login-page link, the forgot form, and the emailed link setting a new password once', async () => {
    const user = await makeUser(app);
    const browser = formSession(await app.listen());
    const login = await browser.get('/login');
    expect(login.text).toContain('href="/forgot-password"');
    expect(login.text).toContain('Forgot your password?');

    const form = await browser.get('/forgot-password');
    expect(form.status).toBe(200);
    const sentUnknown = await browser.post('/forgot-password', { _csrf: hiddenField(form.text, '_csrf'), login: unique('nobody') });
    const sentKnown = await browser.post('/forgot-password', { _csrf: hiddenField(form.text, '_csrf'), login: user.username });
    expect([sentUnknown.status, sentKnown.status]).toStrictEqual([202, 202]);
    expect(sentKnown.text.replace(/name="_csrf" value="[^"]*"/, '')).toBe(sentUnknown.text.replace(/name="_csrf" value="[^"]*"/, ''));
    const token = resetToken(await eventually(() => smtp.to(user.email)[0], 'the reset message'));

    const page = await browser.get(`/reset-password?token=${token}`);
    expect(page.status).toBe(200);
    expect(hiddenField(page.text, 'token')).toBe(token);
    const mismatch = await browser.post('/reset-password', { _csrf: hiddenField(page.text, '_csrf'), token, new_password: NEW_PASSWORD, confirm_password: 'something else' });
    expect(mismatch.status).toBe(400);
    const weak = await browser.post('/reset-password', { _csrf: hiddenField(page.text, '_csrf'), token, new_password: 'qwertyuiop', confirm_password: 'qwertyuiop' });
    expect(weak.status).toBe(400);
    expect(weak.text).toContain('most commonly used passwords');
    const done = await browser.post('/reset-password', { _csrf: hiddenField(page.text, '_csrf'), token, new_password: NEW_PASSWORD, confirm_password: NEW_PASSWORD });
    expect(done.status).toBe(200);
    expect(done.text).toContain('data-testid="reset-done"');
    expect((await signIn(app, user.username, NEW_PASSWORD)).res.status).toBe(200);

    const reused = await browser.get(`/reset-password?token=${token}`);
    expect(reused.status).toBe(400);
    expect(reused.text).toContain('data-testid="reset-invalid"');
  });
});

describe('forgot-password answers before the mail is sent', () => {
  it('answers 202 while the SMTP server has not yet accepted the message', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    const smtp = await startSmtpServer({ holdUntil: gate });
    const app = await startTestApp({ SMTP_URL: smtp.url });
    try {
      const user = await makeUser(app);
      const answer = await app.http.post('/api/auth/password/forgot', { login: user.username });
      expect(answer.status).toBe(202);
      // the server holds the message: the answer did not wait for the mail
      await eventually(() => smtp.to(user.email)[0], 'the held message');
      expect(smtp.accepted).toBe(0);
      release();
      await eventually(() => (smtp.accepted === 1 ? true : undefined), 'the message accepted');
    } finally {
      release();
      await app.close();
      await smtp.close();
    }
  });
});

describe('forgot-password is rate limited like the login endpoints', () => {
  it('shares the per-address login limit: after RATE_LIMIT_LOGIN_PER_MIN requests it answers 429', async () => {
    const app = await startTestApp({ RATE_LIMIT_LOGIN_PER_MIN: '3' });
    try {
      const from = { localAddress: '127.0.0.3' };
      expect((await app.http.post('/api/auth/login', { login: unique('nobody'), password: 'wrong' }, from)).status).toBe(401);
      for (let i = 0; i < 2; i++) expect((await app.http.post('/api/auth/password/forgot', { login: unique('nobody') }, from)).status).toBe(202);
      const limited = await app.http.post('/api/auth/password/forgot', { login: unique('nobody') }, from);
      expect(limited.status).toBe(429);
      expect(limited.body.error).toBe('rate_limited');
      expect((await app.http.post('/api/auth/password/reset', { token: 'x'.repeat(43), new_password: 'four unrelated words here' }, from)).status).toBe(429);
      expect((await app.http.post('/api/auth/password/forgot', { login: unique('nobody') }, { localAddress: '127.0.0.4' })).status, 'another address').toBe(202);
    } finally {
      await app.close();
    }
  });
});
