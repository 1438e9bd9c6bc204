import { describe, expect, it } from 'vitest';
import { ConfigError, configSchema, loadConfig, weakSecretReason } from '../../src/config.ts';
import { thrownBy } from '../helpers/expect.ts';

const STRONG_JWT = 'q8Vn3ZpL0xR7tYc2WmK9sHf4Jd6Ga1Eb5Uo8Ni3Qr7Tz';
const STRONG_SESSION = 'Xy4Kp9Lm2Nq7Rs1Tv6Wz3Ab8Cd5Ef0Gh4Ij9Kl2Mn7Op';
const PRODUCTION = { NODE_ENV: 'production', JWT_SECRET: STRONG_JWT, SESSION_SECRET: STRONG_SESSION, BCRYPT_COST: '10', OIDC_SIGNING_KEYS_FILE: '/run/secrets/oidc-keys' };

/** The one-line message loadConfig refuses `env` with. */
function refusal(env: Record<string, string>): string {
  const err = thrownBy(() => loadConfig(env));
  expect(err, JSON.stringify(env)).toBeInstanceOf(ConfigError);
  expect((err as Error).message).not.toMatch(/\n/);
  return (err as Error).message;
}

describe('production settings', () => {
  it('accepts two different strong secrets and a bcrypt cost of 10', () => {
    const c = loadConfig(PRODUCTION);
    expect(c.NODE_ENV).toBe('production');
    expect(c.BCRYPT_COST).toBe(10);
  });

  it('refuses to start without OpenID Connect signing keys', () => {
    const { OIDC_SIGNING_KEYS_FILE: _file, ...without } = PRODUCTION;
    expect(refusal(without)).toMatch(/^Invalid configuration: OIDC_SIGNING_KEYS: required when NODE_ENV=production/);
  });

  it('refuses JWT_SECRET equal to SESSION_SECRET', () => {
    expect(refusal({ ...PRODUCTION, SESSION_SECRET: STRONG_JWT })).toMatch(/^Invalid configuration: SESSION_SECRET: must differ from JWT_SECRET/);
  });

  it('refuses trivially weak secrets, naming the key', () => {
    expect(refusal({ ...PRODUCTION, JWT_SECRET: 'a'.repeat(32) })).toMatch(/^Invalid configuration: JWT_SECRET: too weak for production \(is one character repeated\)/);
    expect(refusal({ ...PRODUCTION, SESSION_SECRET: 'x'.repeat(64) })).toMatch(/^Invalid configuration: SESSION_SECRET: too weak/);
    expect(refusal({ ...PRODUCTION, JWT_SECRET: 'abcd'.repeat(10) })).toMatch(/JWT_SECRET: too weak for production \(is a 4-character pattern repeated\)/);
    expect(refusal({ ...PRODUCTION, JWT_SECRET: '0101010101010101010101010101010122' })).toMatch(/JWT_SECRET: too weak/);
    expect(refusal({ ...PRODUCTION, JWT_SECRET: 'short-secret' })).toMatch(/^Invalid configuration: JWT_SECRET: /);
  });

  it('refuses a weak previous key: it verifies as the current one does (a rotation lists the new key there first)', () => {
    const other = 'Mn7Op2Kl9Ij4Gh0Ef5Cd8Ab3Wz6Tv1Rs7Nq2Lm9Kp4Xy';
    expect(loadConfig({ ...PRODUCTION, JWT_PREVIOUS_SECRETS: other, SESSION_PREVIOUS_SECRETS: `${other}x` }).JWT_PREVIOUS_SECRETS).toEqual([other]);
    expect(refusal({ ...PRODUCTION, JWT_PREVIOUS_SECRETS: `${other},${'a'.repeat(32)}` }))
      .toMatch(/^Invalid configuration: JWT_PREVIOUS_SECRETS \(secret 2 of 2\): too weak for production \(is one character repeated\)/);
    expect(refusal({ ...PRODUCTION, SESSION_PREVIOUS_SECRETS: 'abcd'.repeat(10) })).toMatch(/^Invalid configuration: SESSION_PREVIOUS_SECRETS: too weak/);
  });

  it('refuses a token key that is also a session key, current or previous', () => {
    expect(refusal({ ...PRODUCTION, JWT_PREVIOUS_SECRETS: STRONG_SESSION })).toMatch(/^Invalid configuration: JWT_PREVIOUS_SECRETS: must not hold a session key/);
    expect(refusal({ ...PRODUCTION, SESSION_PREVIOUS_SECRETS: STRONG_JWT })).toMatch(/^Invalid configuration: SESSION_PREVIOUS_SECRETS: must not hold JWT_SECRET/);
  });

  it('counts bytes, not characters, and lets random hex and base64 secrets through', () => {
    expect(weakSecretReason('é'.repeat(20))).toBe('is one character repeated');
    expect(weakSecretReason('0123456789abcdef0123456789abcdef')).toBe('is a 16-character pattern repeated');
    expect(weakSecretReason('3f9a1c2b7e6d5a4b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d')).toBe(null);
    expect(weakSecretReason('kq3N0v5mXr8PzT1yW4sB7cD2fG6hJ9lL0aE3iO5uY8tR2wQ1')).toBe(null);
  });

  it('refuses a bcrypt cost under 10', () => {
    expect(refusal({ ...PRODUCTION, BCRYPT_COST: '4' })).toMatch(/^Invalid configuration: BCRYPT_COST: must be at least 10 in production/);
  });

  it('leaves development and test free to use fast, simple settings', () => {
    expect(loadConfig({ NODE_ENV: 'development', JWT_SECRET: 'a'.repeat(32), SESSION_SECRET: 'a'.repeat(32), BCRYPT_COST: '4' }).BCRYPT_COST).toBe(4);
  });
});

describe('empty values', () => {
  it('mean "unset" for every key, so the default applies', () => {
    const defaults = loadConfig({});
    for (const key of Object.keys(configSchema.shape)) {
      for (const empty of ['', '  ']) {
        expect(loadConfig({ [key]: empty }), `${key}=${JSON.stringify(empty)}`).toStrictEqual(defaults);
      }
    }
    expect(loadConfig({ PORT: '' }).PORT, 'PORT= is the default port, not a random one').toBe(3000);
  });
});
