import assert from 'node:assert/strict';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../src/config.ts';
import { startServerProcess } from './helpers/processes.ts';

describe('configuration', () => {
  it('applies the documented defaults', () => {
    const c = loadConfig({});
    assert.equal(c.PORT, 3000);
    assert.equal(c.TOKEN_TTL_SECONDS, 60);
    assert.equal(c.RATE_LIMIT_LOGIN_PER_MIN, 10);
    assert.equal(c.RATE_LIMIT_VALIDATE_PER_MIN, 100);
    assert.equal(c.RATE_LIMIT_USER_PER_MIN, 50);
    assert.equal(c.LOCKOUT_THRESHOLD, 5);
    assert.equal(c.LOCKOUT_MINUTES, 30);
    assert.equal(c.BCRYPT_COST, 12);
    assert.equal(c.ISSUER, 'auth-service');
    assert.equal(c.DATABASE_URL, undefined);
  });

  it('names the key and the problem of a bad value', () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ PORT: 'eighty' }, /^Invalid configuration: PORT: /],
      [{ TOKEN_TTL_SECONDS: '0' }, /^Invalid configuration: TOKEN_TTL_SECONDS: /],
      [{ DATABASE_URL: 'mysql://x' }, /^Invalid configuration: DATABASE_URL: /],
      [{ JWT_SECRET: 'short' }, /^Invalid configuration: JWT_SECRET: must be at least 32 characters/],
      [{ TRUST_PROXY: 'not-an-ip' }, /^Invalid configuration: TRUST_PROXY: /],
      [{ NODE_ENV: 'production' }, /^Invalid configuration: JWT_SECRET: required when NODE_ENV=production/],
      [{ LOG_LEVEL: 'loud' }, /^Invalid configuration: LOG_LEVEL: /],
    ];
    for (const [env, message] of cases) {
      assert.throws(() => loadConfig(env), (err: Error) => err instanceof ConfigError && message.test(err.message) && !err.message.includes('\n'), JSON.stringify(env));
    }
  });

  it('stops the start with one line naming the key', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-config-'));
    await assert.rejects(startServerProcess({ DATA_DIR: dataDir, DATABASE_URL: '', BCRYPT_COST: '99' }), (err: Error) => {
      const lines = err.message.split('\n').filter((l) => l.includes('Invalid configuration'));
      return lines.length === 1 && /BCRYPT_COST/.test(lines[0]) && /server exited with 1/.test(err.message);
    });
  });
});
