import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/logging/logger.ts';
import { startTestApp, TEST_ENV } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { eventually } from './smtp.ts';

describe('password reset mail without SMTP_URL', () => {
  it('outside production writes the message to the log and to DATA_DIR/mail/', async () => {
    const lines: string[] = [];
    const sink = new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } });
    const app = await startTestApp({ LOG_LEVEL: 'info' }, { logger: createLogger('info', sink) });
    try {
      const user = await makeUser(app);
      const answer = await app.http.post('/api/auth/password/forgot', { login: user.username });
      expect(answer.status).toBe(202);
      const logged = await eventually(() => lines.find((l) => l.includes('"mail not sent (no SMTP_URL)') || l.includes('mail not sent (no SMTP_URL)')), 'the log line');
      expect(logged).toMatch(/http:\/\/localhost:\d+\/reset-password\?token=[A-Za-z0-9_-]{43}/);
      const dir = path.join(app.config.DATA_DIR, 'mail');
      const files = await readdir(dir);
      expect(files.length).toBe(2);
      const emlFile = files.find((f) => f.endsWith('.eml'))!;
      const eml = await readFile(path.join(dir, emlFile), 'utf8');
      // a plain-text copy beside it, whose link is the one that works
      const text = await readFile(path.join(dir, emlFile.replace(/\.eml$/, '.txt')), 'utf8');
      expect(eml).toContain(`To: ${user.email}`);
      expect(eml).toContain('Subject: Reset your password');
      const token = logged.match(/token=([A-Za-z0-9_-]{43})/)![1];
      expect(text.match(/token=([A-Za-z0-9_-]{43})/)?.[1]).toBe(token);
      expect((await app.http.post('/api/auth/password/reset', { token, new_password: 'four unrelated words here' })).status).toBe(200);
    } finally {
      await app.close();
    }
  });

  it('in production answers 503 email_not_configured, and the page says an administrator must reset the password', async () => {
    const app = await startTestApp({ NODE_ENV: 'production', BCRYPT_COST: '10' });
    try {
      const user = await makeUser(app);
      for (const login of [user.username, 'nobody-at-all']) {
        const r = await app.http.post('/api/auth/password/forgot', { login });
        expect(r.status).toBe(503);
        expect(r.body.error).toBe('email_not_configured');
      }
      const page = await app.http.get('/forgot-password', { headers: { accept: 'text/html' } });
      expect(page.status).toBe(503);
      expect(page.text).toContain('An administrator must reset your password');
      expect((await app.db.query('SELECT 1 FROM password_resets')).rowCount).toBe(0);
    } finally {
      await app.close();
    }
  });
});

describe('password configuration', () => {
  it('reads PASSWORD_RESET_TTL as a duration and PASSWORD_MIN_LENGTH within bcrypt\'s reach', () => {
    expect(loadConfig({}).PASSWORD_RESET_TTL).toBe(1800);
    expect(loadConfig({}).PASSWORD_MIN_LENGTH).toBe(10);
    expect(loadConfig({ PASSWORD_RESET_TTL: '30s' }).PASSWORD_RESET_TTL).toBe(30);
    expect(loadConfig({ PASSWORD_RESET_TTL: '15m' }).PASSWORD_RESET_TTL).toBe(900);
    expect(loadConfig({ PASSWORD_RESET_TTL: '24h' }).PASSWORD_RESET_TTL).toBe(86400);
    for (const bad of ['soon', '0s', '-5m', '1w']) expect(() => loadConfig({ PASSWORD_RESET_TTL: bad }), bad).toThrow(/PASSWORD_RESET_TTL/);
    expect(() => loadConfig({ PASSWORD_MIN_LENGTH: '4' })).toThrow(/PASSWORD_MIN_LENGTH/);
    expect(() => loadConfig({ SMTP_URL: 'http://mail.example' })).toThrow(/SMTP_URL/);
  });

  it('requires PUBLIC_URL with SMTP_URL in production, so a link is never built from a request', () => {
    const production = { ...TEST_ENV, NODE_ENV: 'production', BCRYPT_COST: '10', SMTP_URL: 'smtp://mail.example:25' };
    expect(() => loadConfig(production)).toThrow(ConfigError);
    expect(() => loadConfig(production)).toThrow(/PUBLIC_URL/);
    expect(loadConfig({ ...production, PUBLIC_URL: 'https://sso.example.com' }).PUBLIC_URL).toBe('https://sso.example.com');
  });
});
