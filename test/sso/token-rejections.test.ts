import { createSecretKey } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as jose from 'jose';
import jwt from 'jsonwebtoken';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';

/** Every way a presented token must be refused by POST /api/sso/validate. */
describe('token validation refusals', () => {
  let app: TestApp;
  let client: Awaited<ReturnType<typeof makeClient>>;
  let user: Awaited<ReturnType<typeof makeUser>>;

  beforeAll(async () => {
    app = await startTestApp();
    client = await makeClient(app);
    user = await makeUser(app);
  });
  afterAll(() => app.close());

  const issue = async (c = client) =>
    (await app.http.post('/api/sso/token', { client_id: c.client_id, client_secret: c.client_secret, username: user.username })).body.token as string;
  const validate = (token: string, c = client) =>
    app.http.post('/api/sso/validate', { client_id: c.client_id, client_secret: c.client_secret, token });
  const key = () => createSecretKey(Buffer.from(app.config.JWT_SECRET!, 'utf8'));
  /** A token signed like ours but with the given changes to its claims. */
  const forge = async (changes: Record<string, unknown>, options: { alg?: string; secret?: string } = {}) => {
    const claims = { ...jose.decodeJwt(await issue()), ...changes };
    const secret = new TextEncoder().encode(options.secret ?? app.config.JWT_SECRET!);
    return new jose.SignJWT(claims as jose.JWTPayload).setProtectedHeader({ alg: options.alg ?? 'HS256', typ: 'JWT' }).sign(secret);
  };

  const expectRefused = async (token: string, error: string) => {
    const r = await validate(token);
    expect(r.status, r.text).toBe(401);
    expect(r.body.valid).toBe(false);
    expect(r.body.error).toBe(error);
  };

  it('refuses an expired token', async () => {
    const now = Math.floor(Date.now() / 1000);
    await expectRefused(await forge({ iat: now - 120, exp: now - 60 }), 'token_expired');
  });

  it('refuses a token whose payload was changed', async () => {
    const [h, p, s] = (await issue()).split('.');
    const claims = JSON.parse(Buffer.from(p, 'base64url').toString());
    claims.user_id = '999999';
    await expectRefused(`${h}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${s}`, 'invalid_token');
  });

  it('refuses a token signed with another key', async () => {
    await expectRefused(await forge({}, { secret: 'another-secret-another-secret-0123456789' }), 'invalid_token');
  });

  it('refuses alg none', async () => {
    const claims = jose.decodeJwt(await issue());
    const unsigned = new jose.UnsecuredJWT(claims as jose.JWTPayload).encode();
    await expectRefused(unsigned, 'invalid_token');
    const noneWithSig = jwt.sign(claims, '', { algorithm: 'none' });
    await expectRefused(noneWithSig, 'invalid_token');
  });

  it('refuses HS512 even with the right key', async () => {
    await expectRefused(await forge({}, { alg: 'HS512' }), 'invalid_token');
  });

  it('refuses a wrong issuer and a wrong audience', async () => {
    await expectRefused(await forge({ iss: 'someone-else' }), 'invalid_token');
    await expectRefused(await forge({ aud: 'auth_api' }), 'invalid_token');
  });

  it('refuses a token presented by a client other than the one it was issued for, and leaves it usable', async () => {
    const other = await makeClient(app);
    const token = await issue();
    const r = await validate(token, other);
    expect(r.status).toBe(401);
    expect(r.body.error).toBe('invalid_token');
    expect((await validate(token)).status, 'the rightful client can still use it').toBe(200);
  });

  it('refuses a well-signed token with a jti it never issued', async () => {
    await expectRefused(await forge({ jti: '00000000-0000-4000-8000-000000000000' }), 'invalid_token');
    await expectRefused(await forge({ jti: 'not-a-uuid' }), 'invalid_token');
  });

  it('refuses garbage in place of a token', async () => {
    for (const token of ['x', 'a.b.c', '....', 'eyJhbGciOiJIUzI1NiJ9.e30.', jwt.sign({}, key())]) await expectRefused(token, 'invalid_token');
  });

  it('refuses the token of a user deactivated after issue, and still once the user is active again', async () => {
    const other = await makeUser(app);
    const issueFor = async () => (await app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username: other.username })).body.token;
    const [first, second] = [await issueFor(), await issueFor()];
    await app.services.users.setActive(other.username, false, { via: 'cli' });
    await expectRefused(first, 'user_inactive');
    await app.services.users.setActive(other.username, true, { via: 'cli' });
    await expectRefused(second, 'token_revoked'); // deactivating invalidated it: it does not come back to life
  });

  it('the legacy /api/validate-token answers like /api/sso/validate, marked deprecated', async () => {
    const token = await issue();
    const r = await app.http.post('/api/validate-token', { client_id: client.client_id, client_secret: client.client_secret, token });
    expect(r.status, r.text).toBe(200);
    expect(r.body.valid).toBe(true);
    expect(r.body.user.id).toBe(user.id);
    expect(r.headers.deprecation).toBe('true');
    expect(r.headers.link).toBe('</api/sso/validate>; rel="successor-version"');
    const again = await app.http.post('/api/validate-token', { client_id: client.client_id, client_secret: client.client_secret, token });
    expect(again.body.error).toBe('token_already_used');
  });
});
