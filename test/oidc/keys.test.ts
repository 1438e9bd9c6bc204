import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadOidcKeys, OidcKeyError, parseSigningKeys } from '../../src/oidc/keys.ts';

const rsaPem = () => generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();

describe('OpenID Connect signing keys', () => {
  it('are generated once in DATA_DIR outside production, each with a kid, and read again', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'oidc-keys-'));
    const first = loadOidcKeys({ DATA_DIR: dir });
    expect(first.map((k) => k.alg)).toEqual(['RS256', 'ES256']);
    for (const k of first) expect(k.kid).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(loadOidcKeys({ DATA_DIR: dir })).toEqual(first);
    expect(JSON.parse(await readFile(path.join(dir, 'oidc-keys.json'), 'utf8')).keys).toHaveLength(2);
  });

  it('take PEM blocks or a JWK set, in order, keeping a given kid', () => {
    const [a, b] = [rsaPem(), rsaPem()];
    const fromPem = parseSigningKeys(`${a}\n${b}`);
    expect(fromPem).toHaveLength(2);
    const jwk = { ...fromPem[1], kid: 'previous-2026' };
    const set = parseSigningKeys(JSON.stringify({ keys: [fromPem[0], jwk] }));
    expect(set.map((k) => k.kid)).toEqual([fromPem[0].kid, 'previous-2026']);
  });

  it('refuse public keys, an EC-only set (RS256 is mandatory), and garbage, saying why', () => {
    const pub = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ format: 'jwk' });
    expect(() => parseSigningKeys(JSON.stringify({ keys: [pub] }))).toThrow(/public only|not a private key/);
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' });
    expect(() => parseSigningKeys(JSON.stringify([ec]))).toThrow(/RSA key .* required/);
    expect(() => parseSigningKeys('hello')).toThrow(OidcKeyError);
    expect(() => loadOidcKeys({ DATA_DIR: '/nonexistent', OIDC_SIGNING_KEYS: 'hello' })).toThrow(/^Invalid configuration: OIDC_SIGNING_KEYS: /);
  });
});
