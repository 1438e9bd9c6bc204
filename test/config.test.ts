import { mkdtemp, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { thrownBy } from './helpers/expect.ts';
import { ConfigError, configSchema, loadConfig } from '../src/config.ts';
import { ROOT, startServerProcess } from './helpers/processes.ts';

describe('configuration', () => {
  it('applies the documented defaults', () => {
    const c = loadConfig({});
    expect(c.PORT).toBe(3000);
    expect(c.TOKEN_TTL_SECONDS).toBe(60);
    expect(c.RATE_LIMIT_LOGIN_PER_MIN).toBe(10);
    expect(c.RATE_LIMIT_VALIDATE_PER_MIN).toBe(100);
    expect(c.RATE_LIMIT_USER_PER_MIN).toBe(50);
    expect(c.LOCKOUT_THRESHOLD).toBe(5);
    expect(c.LOCKOUT_MINUTES).toBe(30);
    expect(c.BCRYPT_COST).toBe(12);
    expect(c.ISSUER).toBe('auth-service');
    expect(c.DATABASE_URL).toBe(undefined);
  });

  it('has every key in .env.example and in docs/configuration.md, as .env.example says', async () => {
    const example = await readFile(path.join(ROOT, '.env.example'), 'utf8');
    const readme = await readFile(path.join(ROOT, 'docs/configuration.md'), 'utf8');
    const keys = Object.keys(configSchema.shape);
    expect(keys.filter((k) => !new RegExp(`^#? ?${k}=`, 'm').test(example)), 'keys missing from .env.example').toStrictEqual([]);
    expect(keys.filter((k) => !readme.includes(`\`${k}\``)), 'keys missing from docs/configuration.md').toStrictEqual([]);
  });

  it('names the key and the problem of a bad value', () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ PORT: 'eighty' }, /^Invalid configuration: PORT: /],
      // in words, not zod's "Too small: expected number to be >=5"
      [{ TOKEN_TTL_SECONDS: '0' }, /^Invalid configuration: TOKEN_TTL_SECONDS: At least 5$/],
      [{ DATABASE_URL: 'mysql://x' }, /^Invalid configuration: DATABASE_URL: /],
      [{ JWT_SECRET: 'short' }, /^Invalid configuration: JWT_SECRET: must be at least 32 characters/],
      [{ TRUST_PROXY: 'not-an-ip' }, /^Invalid configuration: TRUST_PROXY: /],
      [{ NODE_ENV: 'production' }, /^Invalid configuration: JWT_SECRET: required when NODE_ENV=production/],
      [{ LOG_LEVEL: 'loud' }, /^Invalid configuration: LOG_LEVEL: Must be one of: fatal, error, warn, info, debug, trace, silent$/],
      // a cookie expiry past what a Date holds made every sign-in a 500
      [{ SESSION_TTL_SECONDS: '99999999999999' }, /^Invalid configuration: SESSION_TTL_SECONDS: /],
      // seconds past an int made every reset request fail in the database (and answer 202 as ever)
      [{ PASSWORD_RESET_TTL: '30000d' }, /^Invalid configuration: PASSWORD_RESET_TTL: /],
      [{ PASSWORD_RESET_INTERVAL: '30000d' }, /^Invalid configuration: PASSWORD_RESET_INTERVAL: /],
    ];
    for (const [env, message] of cases) {
      expect(thrownBy(() => loadConfig(env)), JSON.stringify(env)).toSatisfy((err: Error) => err instanceof ConfigError && message.test(err.message) && !err.message.includes('\n'));
    }
  });

  it('stops the start with one line naming the key', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-config-'));
    await expect(startServerProcess({ DATA_DIR: dataDir, DATABASE_URL: '', BCRYPT_COST: '99' })).rejects.toSatisfy((err: Error) => {
      const lines = err.message.split('\n').filter((l) => l.includes('Invalid configuration'));
      return lines.length === 1 && /BCRYPT_COST/.test(lines[0]) && /server exited with 1/.test(err.message);
    });
  });
});
