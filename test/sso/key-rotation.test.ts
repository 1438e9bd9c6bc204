import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as jose from 'jose';
import { keyId } from '../../src/sso/keys.ts';
import { startTestApp, TEST_ENV, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';

const OLD = TEST_ENV.JWT_SECRET;
const NEW = 'the-new-jwt-secret-the-new-jwt-secret-0123456789';
const kidOf = (secret: string) => keyId(Buffer.from(secret, 'utf8'));

/**
 * Rotating JWT_SECRET: instances on one database with different key configurations stand
 * for the instances of a rolling deploy (or one instance before and after its restart).
 */
describe('token signing key rotation', () => {
  let before: TestApp; // JWT_SECRET=OLD: the instance before the rotation
  let rotated: TestApp; // JWT_SECRET=NEW, JWT_PREVIOUS_SECRETS=OLD: after the restart
  let dropped: TestApp; // JWT_SECRET=NEW alone: the old key dropped
  let client: Awaited<ReturnType<typeof makeClient>>;
  let user: Awaited<ReturnType<typeof makeUser>>;

  beforeAll(async () => {
    before = await startTestApp();
    rotated = await startTestApp({ JWT_SECRET: NEW, JWT_PREVIOUS_SECRETS: OLD }, { db: before.db });
    dropped = await startTestApp({ JWT_SECRET: NEW }, { db: before.db });
    client = await makeClient(before);
    user = await makeUser(before);
  });
  afterAll(async () => {
    await dropped?.close();
    await rotated?.close();
    await before?.close();
  });

  const creds = () => ({ client_id: client.client_id, client_secret: client.client_secret });
  const issue = async (app: TestApp) => {
    const r = await app.http.post('/api/sso/token', { ...creds(), username: user.username });
    expect(r.status, r.text).toBe(200);
    return r.body.token as string;
  };
  const validate = (app: TestApp, token: string) => app.http.post('/api/sso/validate', { ...creds(), token });
  const accessToken = async (app: TestApp) => {
    const r = await app.http.post('/api/login', { username: user.username, password: user.password });
    expect(r.status, r.text).toBe(200);
    return r.body.token as string;
  };
  const profile = (app: TestApp, token: string) => app.http.get('/api/user', { headers: { authorization: `Bearer ${token}` } });

  it('a token signed before the restart validates once with the new key signing and the old one previous', async () => {
    const token = await issue(before);
    expect(jose.decodeProtectedHeader(token).kid).toBe(kidOf(OLD));
    const first = await validate(rotated, token);
    expect(first.status, first.text).toBe(200);
    expect(first.body.user.id).toBe(user.id);
    const again = await validate(rotated, token);
    expect(again.status).toBe(401);
    expect(again.body.error).toBe('token_already_used');
  });

  it('a key read from a file with its newline still verifies once moved to JWT_PREVIOUS_SECRETS, and the next key after it', async () => {
    const fromFile = `${NEW}-mounted\n`;
    const signing = await startTestApp({ JWT_SECRET: fromFile }, { db: before.db });
    const moved = await startTestApp({ JWT_SECRET: NEW, JWT_PREVIOUS_SECRETS: `${OLD},${fromFile}` }, { db: before.db });
    try {
      const token = await issue(signing);
      expect(jose.decodeProtectedHeader(token).kid).toBe(kidOf(fromFile));
      const checked = await validate(moved, token);
      expect(checked.status, checked.text).toBe(200);
    } finally {
      await moved.close();
      await signing.close();
    }
  });

  it('refuses a token of the old key once that key is dropped, as invalid_token', async () => {
    const token = await issue(before);
    const r = await validate(dropped, token);
    expect(r.status).toBe(401);
    expect(r.body).toMatchObject({ valid: false, error: 'invalid_token' });
    const access = await accessToken(before);
    expect((await profile(rotated, access)).status).toBe(200);
    expect((await profile(dropped, access)).status).toBe(401);
  });

  it('new tokens name the new key by a kid derived from it that does not reveal it', async () => {
    for (const token of [await issue(rotated), await accessToken(rotated)]) {
      const header = jose.decodeProtectedHeader(token);
      expect(header).toMatchObject({ alg: 'HS256', kid: kidOf(NEW) });
      expect(header.kid).not.toBe(kidOf(OLD));
      expect(header.kid).toMatch(/^[A-Za-z0-9_-]{16}$/);
      expect(NEW.includes(String(header.kid))).toBe(false);
      // signed with the new key: an independent library verifies it with NEW
      await jose.jwtVerify(token, new TextEncoder().encode(NEW), { algorithms: ['HS256'] });
    }
    const token = await issue(rotated);
    expect((await validate(dropped, token)).status, 'the new key alone validates it').toBe(200);
    // an instance that does not know the new key yet refuses it: hence the runbook's first step
    const unknown = await validate(before, await issue(rotated));
    expect(unknown.body.error).toBe('invalid_token');
  });

  it('during a rolling deploy, an instance that knows the next key only as previous accepts its tokens', async () => {
    const preparing = await startTestApp({ JWT_SECRET: OLD, JWT_PREVIOUS_SECRETS: NEW }, { db: before.db });
    try {
      const fromNew = await issue(rotated);
      expect((await validate(preparing, fromNew)).status).toBe(200);
      const fromPreparing = await issue(preparing);
      expect(jose.decodeProtectedHeader(fromPreparing).kid, 'previous secrets never sign').toBe(kidOf(OLD));
      expect((await validate(rotated, fromPreparing)).status).toBe(200);
      expect((await profile(preparing, await accessToken(rotated))).status).toBe(200);
    } finally {
      await preparing.close();
    }
  });

  /** The claims of a real token with `changes` (undefined deletes), signed with `secret` under `kid`. */
  const forge = async (token: string, changes: Record<string, unknown>, options: { kid?: string | null; secret?: string } = {}) => {
    const claims: Record<string, unknown> = { ...jose.decodeJwt(token), ...changes };
    for (const [k, v] of Object.entries(changes)) if (v === undefined) delete claims[k];
    const secret = options.secret ?? OLD;
    const kid = options.kid === undefined ? kidOf(secret) : options.kid;
    const header = kid === null ? { alg: 'HS256', typ: 'JWT' } : { alg: 'HS256', typ: 'JWT', kid };
    return new jose.SignJWT(claims as jose.JWTPayload).setProtectedHeader(header).sign(new TextEncoder().encode(secret));
  };

  it('refuses a token whose kid names no known key, even when the signature is right', async () => {
    const real = await issue(before);
    for (const kid of ['no-such-key-0000', kidOf(NEW), '']) {
      const r = await validate(before, await forge(real, {}, { kid }));
      expect(r.status, kid).toBe(401);
      expect(r.body.error, kid).toBe('invalid_token');
    }
    expect((await validate(before, await forge(real, {}))).status, 'the same token under its own kid is fine').toBe(200);
  });

  it('refuses SSO and access tokens that lack exp, iat, iss, aud or jti although correctly signed', async () => {
    for (const claim of ['exp', 'iat', 'iss', 'aud', 'jti']) {
      const sso = await validate(before, await forge(await issue(before), { [claim]: undefined }));
      expect(sso.status, `SSO token without ${claim}`).toBe(401);
      expect(sso.body.error, `SSO token without ${claim}`).toBe('invalid_token');
      const access = await profile(before, await forge(await accessToken(before), { [claim]: undefined }));
      expect(access.status, `access token without ${claim}`).toBe(401);
    }
    // the forging itself is sound: with every claim the same tokens pass
    expect((await validate(before, await forge(await issue(before), {}))).status).toBe(200);
    expect((await profile(before, await forge(await accessToken(before), {}))).status).toBe(200);
  });

  it('accepts a token without kid (issued before tokens carried one) only when a known key signed it', async () => {
    const legacy = await forge(await issue(before), {}, { kid: null, secret: OLD });
    expect((await validate(rotated, legacy)).status, 'signed with a previous key').toBe(200);
    const dropped2 = await forge(await issue(before), {}, { kid: null, secret: OLD });
    expect((await validate(dropped, dropped2)).body.error, 'signed with a dropped key').toBe('invalid_token');
  });
});
