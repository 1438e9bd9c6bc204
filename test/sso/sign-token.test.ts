import jwt from 'jsonwebtoken';
import { describe, expect, it } from 'vitest';
import { signingKeysOf } from '../../src/sso/keys.ts';
import { signSsoToken, signToken, type SsoClaims, verifyToken } from '../../src/sso/tokens.ts';

const keys = signingKeysOf(Buffer.from('current-secret-current-secret-0123456789'), [Buffer.from('previous-secret-previous-secret-0123456789')]);

const claims = (changes: Partial<SsoClaims> = {}): SsoClaims => ({
  user_id: '42',
  username: 'alice',
  client_id: 'shop',
  client_name: 'The Shop',
  roles: ['user'],
  ip_address: '203.0.113.9',
  iat: 1_790_000_000,
  exp: 1_790_000_060,
  iss: 'auth-service',
  aud: 'client_applications',
  jti: '8a1c3f57-3c43-4a8e-9d57-2f0d1d3b6c11',
  ...changes,
});

describe('signSsoToken (HS256 on the KeyObject, for token issue)', () => {
  it('writes the very bytes jsonwebtoken writes for the same claims and key', () => {
    const cases: SsoClaims[] = [
      claims(),
      claims({ username: 'zoë ünïcödé 🙂', client_name: 'Ein "Shop" \\ mit\nZeilen', roles: ['admin'] }),
      claims({ ip_address: '2001:db8::1', user_id: '9007199254740991', iss: 'https://auth.example' }),
      claims({ username: '', client_name: '' }),
    ];
    for (const c of cases) {
      expect(signSsoToken(c, keys)).toBe(jwt.sign(c, keys.signing.key, { algorithm: 'HS256', keyid: keys.signing.kid }));
      expect(signSsoToken(c, keys)).toBe(signToken(c, keys));
    }
  });

  it('signs with the current key and names it, so the verifier (and jsonwebtoken) accept the token', () => {
    const now = Math.floor(Date.now() / 1000);
    const token = signSsoToken(claims({ iat: now, exp: now + 60 }), keys);
    const header = JSON.parse(Buffer.from(token.split('.')[0], 'base64url').toString());
    expect(header).toStrictEqual({ alg: 'HS256', typ: 'JWT', kid: keys.signing.kid });
    expect(verifyToken(token, keys, { issuer: 'auth-service', audience: 'client_applications' })).toMatchObject({ ok: true, claims: { username: 'alice' } });
    expect(jwt.verify(token, keys.signing.key, { algorithms: ['HS256'] })).toMatchObject({ jti: claims().jti });
    const other = signingKeysOf(Buffer.from('another-secret-another-secret-0123456789'));
    expect(signSsoToken(claims(), other).split('.')[0], 'each key ring its own header').not.toBe(token.split('.')[0]);
  });
});
