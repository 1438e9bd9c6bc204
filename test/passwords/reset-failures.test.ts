import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { auditRows, signIn } from '../auth/support.ts';
import { eventually, resetToken, startSmtpServer } from './smtp.ts';
import { startLoggedApp } from '../ops/helpers/logged-app.ts';

/** A free loopback port (nothing listens on it once this returns). */
async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

describe('a reset link whose mail the SMTP server never took', () => {
  it('is taken back (audited mail_failed), so the user can ask again as soon as mail works', async () => {
    const port = await freePort();
    const app = await startTestApp({ SMTP_URL: `smtp://127.0.0.1:${port}`, PUBLIC_URL: 'https://sso.example.test' });
    const received: string[] = [];
    let smtp: SMTPServer | undefined;
    try {
      const user = await makeUser(app);
      // nothing listens on the port: the mail fails after the 202
      expect((await app.http.post('/api/auth/password/forgot', { login: user.username })).status).toBe(202);
      await app.services.passwords.drain();
      const requests = async () => (await auditRows(app, user.username)).filter((r) => r.action === 'user.password_reset_request')
        .map((r) => `${r.outcome}${r.details.reason ? `:${r.details.reason}` : ''}`);
      expect(await requests()).toStrictEqual(['success', 'failure:mail_failed']);
      expect((await app.db.query('SELECT 1 FROM password_resets WHERE user_id = $1', [user.id])).rowCount, 'no link left that nobody received').toBe(0);

      smtp = new SMTPServer({
        authOptional: true, disabledCommands: ['STARTTLS', 'AUTH'], logger: false,
        onData(stream, session, cb) {
          stream.resume();
          stream.on('end', () => {
            received.push(session.envelope.rcptTo[0].address);
            cb();
          });
        },
      });
      await new Promise<void>((r) => smtp!.listen(port, '127.0.0.1', r));
      expect((await app.http.post('/api/auth/password/forgot', { login: user.username })).status).toBe(202);
      await app.services.passwords.drain();
      expect(received, 'the request right after sends the link (not refused as recently_sent)').toStrictEqual([user.email]);
      expect(await requests()).toStrictEqual(['success', 'failure:mail_failed', 'success']);
    } finally {
      await app.close();
      if (smtp) await new Promise<void>((r) => smtp!.close(() => r()));
    }
  });
});

describe('a reset link and a deactivation', () => {
  let app: TestApp;
  let smtp: Awaited<ReturnType<typeof startSmtpServer>>;
  beforeAll(async () => {
    smtp = await startSmtpServer();
    app = await startTestApp({ SMTP_URL: smtp.url, PUBLIC_URL: 'https://sso.example.test' });
  });
  afterAll(async () => {
    await app?.close();
    await smtp?.close();
  });

  it('is logged with why it failed: the error\'s code and message (was "[object Object]", a review helper; the code was redacted as a two-factor code)', async () => {
    const app = await startLoggedApp({ SMTP_URL: `smtp://127.0.0.1:${await freePort()}`, PUBLIC_URL: 'https://sso.example.test' });
    try {
      const user = await makeUser(app);
      expect((await app.http.post('/api/auth/password/forgot', { login: user.username })).status).toBe(202);
      await app.services.passwords.drain();
      const line = app.entries().find((e) => e.msg === 'password reset mail failed');
      expect(line, 'the failure is logged').toBeTruthy();
      expect(line!.err).toMatchObject({ error_code: expect.stringMatching(/ECONNREFUSED|ESOCKET|ECONNECTION/), message: expect.stringMatching(/ECONNREFUSED|connect/i) });
    } finally {
      await app.close();
    }
  });

  it('a link mailed before the account was deactivated does not work once it is activated again (command line and admin API)', async () => {
    const admin = await makeUser(app, { role: 'admin' });
    const adminCookie = (await signIn(app, admin.username, admin.password)).cookie!;
    for (const path of ['cli', 'api'] as const) {
      const user = await makeUser(app);
      expect((await app.http.post('/api/auth/password/forgot', { login: user.username })).status).toBe(202);
      const token = resetToken(await eventually(() => smtp.to(user.email)[0], 'the reset message'));
      if (path === 'cli') {
        const actor = { via: 'cli', username: 'test' } as const;
        await app.services.users.setActive(user.username, false, actor);
        await app.services.users.setActive(user.username, true, actor);
      } else {
        for (const active of [false, true]) {
          const r = await app.http.patch(`/api/admin/users/${user.id}`, { active }, { headers: { cookie: adminCookie } });
          expect(r.status, r.text).toBe(200);
        }
      }
      const used = await app.http.post('/api/auth/password/reset', { token, new_password: 'four unrelated words here' });
      expect([used.status, used.body.error], `${path}: ${used.text}`).toStrictEqual([400, 'invalid_reset_token']);
      expect((await signIn(app, user.username, user.password)).res.status, 'the password is the old one').toBe(200);
    }
  });
});
