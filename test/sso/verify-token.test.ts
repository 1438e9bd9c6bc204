import { createHmac, createSecretKey } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { describe, expect, it } from 'vitest';
import { signingKeysOf } from '../../src/sso/keys.ts';
import { signToken, verifyToken } from '../../src/sso/tokens.ts';

const CURRENT = Buffer.from('current-secret-current-secret-0123456789');
const PREVIOUS = Buffer.from('previous-secret-previous-secret-0123456789');
const keys = signingKeysOf(CURRENT, [PREVIOUS]);
const expect_ = { issuer: 'auth-service', audience: 'client_applications' };
const now = () => Math.floor(Date.now() / 1000);
const claims = (changes: Record<string, unknown> = {}): Record<string, unknown> => ({
  user_id: '7', client_id: 'shop', iat: now(), exp: now() + 60, iss: 'auth-service', aud: 'client_applications',
  jti: '8a1c3f57-3c43-4a8e-9d57-2f0d1d3b6c11', ...changes,
});
const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
/** A token signed with `secret` under exactly this header and payload (no claim added). */
const signed = (header: unknown, payload: unknown, secret: Buffer) => {
  const input = `${b64(header)}.${b64(payload)}`;
  return `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`;
};
/** One of our tokens with these claims, exactly (signToken would add iat). */
const ours = (c: Record<string, unknown>, secret = CURRENT) => signed({ alg: 'HS256', typ: 'JWT', kid: signingKeysOf(secret).signing.kid }, c, secret);
const verify = (token: string, options: { ignoreExpiration?: boolean } = {}) => verifyToken(token, keys, { ...expect_, ...options });
const reason = (token: string) => {
  const r = verify(token);
  return r.ok ? 'ok' : r.reason;
};

/** What jsonwebtoken.verify (the check this one replaced) says of a token, as a reason. */
function jsonwebtokenReason(token: string): string {
  let header: { kid?: unknown } | null = null;
  try {
    header = JSON.parse(Buffer.from(token.split('.')[0], 'base64url').toString());
  } catch {
    return 'invalid_token';
  }
  const candidates = header && typeof header === 'object' && header.kid === undefined
    ? keys.all : [keys.byKid.get(String(header?.kid))].filter((k) => k !== undefined);
  for (let i = 0; i < candidates.length; i++) {
    try {
      const c = jwt.verify(token, candidates[i], { algorithms: ['HS256'], ...expect_ }) as Record<string, unknown>;
      const complete = Number.isFinite(c.exp) && Number.isFinite(c.iat) && typeof c.iss === 'string' && c.aud !== undefined && typeof c.jti === 'string' && c.jti !== '';
      return complete ? 'ok' : 'invalid_token';
    } catch (err) {
      if ((err as Error).message === 'invalid signature' && i < candidates.length - 1) continue;
      return (err as Error).name === 'TokenExpiredError' ? 'token_expired' : 'invalid_token';
    }
  }
  return 'invalid_token';
}

describe('verifyToken (HS256 on the KeyObject)', () => {
  const good = signToken(claims(), keys);

  it('accepts a token it signed, and one signed with the previous secret under its kid', () => {
    expect(verify(good)).toMatchObject({ ok: true, claims: { user_id: '7' } });
    const previousKeys = signingKeysOf(PREVIOUS);
    expect(reason(signToken(claims(), previousKeys))).toBe('ok');
    expect(reason(signed({ alg: 'HS256', typ: 'JWT' }, claims(), PREVIOUS)), 'a kid-less token of the previous key').toBe('ok');
  });

  it('refuses a tampered signature, a signature of another key and a non-canonical signature', () => {
    const [h, p, s] = good.split('.');
    const flipped = s[0] === 'A' ? `B${s.slice(1)}` : `A${s.slice(1)}`;
    expect(reason(`${h}.${p}.${flipped}`)).toBe('invalid_token');
    expect(reason(`${h}.${p}.${s.slice(0, -1)}`), 'a signature cut short').toBe('invalid_token');
    expect(reason(`${h}.${p}.${s}A`), 'a signature with a byte too many').toBe('invalid_token');
    // the last base64url character of a 32-byte signature carries 2 spare bits: another spelling of the same bytes
    const last = s.at(-1)!;
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const respelled = alphabet[alphabet.indexOf(last) ^ 1];
    expect(reason(`${h}.${p}.${s.slice(0, -1)}${respelled}`)).toBe('invalid_token');
    expect(reason(signed({ alg: 'HS256', typ: 'JWT', kid: keys.signing.kid }, claims(), Buffer.from('another-secret-another-secret-0123456')))).toBe('invalid_token');
    expect(reason(`${h}.${b64({ ...claims(), user_id: '8' })}.${s}`), 'a changed payload').toBe('invalid_token');
  });

  it('refuses alg none (signed or not), HS512 and a header that is not an object', () => {
    const [, p] = good.split('.');
    expect(reason(`${b64({ alg: 'none', typ: 'JWT' })}.${p}.`)).toBe('invalid_token');
    expect(reason(`${b64({ alg: 'none', kid: keys.signing.kid })}.${p}.${good.split('.')[2]}`)).toBe('invalid_token');
    expect(reason(jwt.sign(claims(), createSecretKey(CURRENT), { algorithm: 'HS512', keyid: keys.signing.kid }))).toBe('invalid_token');
    expect(reason(signed(['HS256'], claims(), CURRENT))).toBe('invalid_token');
    expect(reason(`${Buffer.from('{not json').toString('base64url')}.${p}.${good.split('.')[2]}`)).toBe('invalid_token');
  });

  it('refuses a kid it does not know, even when the signature is by a key it knows', () => {
    expect(reason(signed({ alg: 'HS256', typ: 'JWT', kid: 'no-such-kid' }, claims(), CURRENT))).toBe('invalid_token');
    expect(reason(signed({ alg: 'HS256', typ: 'JWT', kid: 7 }, claims(), CURRENT))).toBe('invalid_token');
    const dropped = signingKeysOf(CURRENT);
    expect(verifyToken(signToken(claims(), signingKeysOf(PREVIOUS)), dropped, expect_)).toStrictEqual({ ok: false, reason: 'invalid_token' });
  });

  it('says token_expired for an expired token, unless expiry is ignored; a not-yet-valid one is invalid', () => {
    const expired = signToken(claims({ iat: now() - 120, exp: now() - 60 }), keys);
    expect(reason(expired)).toBe('token_expired');
    expect(reason(signToken(claims({ exp: now() }), keys)), 'expires this very second').toBe('token_expired');
    expect(verify(expired, { ignoreExpiration: true }).ok).toBe(true);
    expect(reason(signToken(claims({ nbf: now() + 60 }), keys))).toBe('invalid_token');
    expect(reason(ours(claims({ exp: String(now() + 60) })))).toBe('invalid_token');
  });

  it('refuses another issuer or audience and a token missing a required claim', () => {
    expect(reason(signToken(claims({ iss: 'someone-else' }), keys))).toBe('invalid_token');
    expect(reason(signToken(claims({ aud: 'auth_api' }), keys))).toBe('invalid_token');
    expect(reason(signToken(claims({ aud: ['auth_api', 'client_applications'] }), keys)), 'an audience among several').toBe('ok');
    for (const missing of ['exp', 'iat', 'jti', 'iss', 'aud']) {
      const { [missing]: _dropped, ...rest } = claims();
      expect(reason(ours(rest)), missing).toBe('invalid_token');
    }
    expect(reason(signed({ alg: 'HS256', typ: 'JWT', kid: keys.signing.kid }, 'not a claims object', CURRENT))).toBe('invalid_token');
  });

  it('gives the reason jsonwebtoken.verify gave, for every one of these tokens', () => {
    const [h, p, s] = good.split('.');
    const tokens = [
      good, `${h}.${p}.`, `${h}.${p}`, `${h}..${s}`, 'garbage', '', `${h}.${p}.${s}.x`, `${h} .${p}.${s}`,
      signToken(claims({ iat: now() - 120, exp: now() - 60, iss: 'x' }), keys),
      signToken(claims({ nbf: now() + 60, exp: now() - 1 }), keys),
      signToken(claims({ aud: 'x', iss: 'y' }), keys),
      signed({ alg: 'HS256' }, claims(), CURRENT),
      signed({ alg: 'HS256', kid: keys.signing.kid }, claims({ jti: '' }), CURRENT),
      signed({ alg: 'HS256', typ: 'JWT', kid: null }, claims(), CURRENT),
    ];
    for (const token of tokens) expect(reason(token), token).toBe(jsonwebtokenReason(token));
  });
});
