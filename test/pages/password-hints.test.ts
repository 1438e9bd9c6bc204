import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { eventually, resetToken, startSmtpServer } from '../passwords/smtp.ts';
import { formSession, hiddenField } from './form-session.ts';

/** The tag of the input with this id in a page ('' when there is none). */
function field(html: string, id: string): string {
  return html.match(new RegExp(`<input[^>]*id="${id}"[^>]*>`))?.[0] ?? '';
}

describe('password forms with PASSWORD_MIN_LENGTH=14', () => {
  let app: TestApp;
  let smtp: Awaited<ReturnType<typeof startSmtpServer>>;
  beforeAll(async () => {
    smtp = await startSmtpServer();
    app = await startTestApp({ PASSWORD_MIN_LENGTH: '14', SMTP_URL: smtp.url, MAIL_FROM: 'Auth <auth@example.test>', PUBLIC_URL: 'https://sso.example.test' });
  });
  afterAll(async () => {
    await app?.close();
    await smtp?.close();
  });

  /** A form session signed in at /login. */
  async function signedIn(user: { username: string; password: string }) {
    const s = formSession(app.app);
    const page = await s.get('/login');
    const res = await s.post('/login', { _csrf: hiddenField(page.text, '_csrf'), step: 'password', login: user.username, password: user.password });
    expect(res.status).toBe(303);
    return s;
  }

  it('say the configured minimum in the hint and the minlength of every new password field', async () => {
    const user = await makeUser(app);
    const admin = await makeUser(app, { role: 'admin' });
    const change = (await (await signedIn(user)).get('/account/password')).text;
    expect(change).toContain('At least 14 characters;');
    expect(field(change, 'new_password')).toContain('minlength="14"');

    expect((await app.http.post('/api/auth/password/forgot', { login: user.username })).status).toBe(202);
    const token = resetToken(await eventually(() => smtp.to(user.email)[0], 'the reset message'));
    const reset = await formSession(app.app).get(`/reset-password?token=${token}`);
    expect(reset.status).toBe(200);
    expect(reset.text).toContain('At least 14 characters;');
    expect(field(reset.text, 'new_password')).toContain('minlength="14"');

    const create = (await (await signedIn(admin)).get('/admin/users/new')).text;
    expect(create).toContain('At least 14 characters (the minimum this service is set to) and at most 72 bytes');
    expect(field(create, 'password')).toContain('minlength="14"');
    expect(field(create, 'password'), 'a longer one is the server\'s to explain (72 bytes), never cut short by the browser').not.toContain('maxlength="200"');
  });
});
