import { createHmac } from 'node:crypto';
import { mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { developmentKey } from '../../src/config/key-file.ts';
import { loadSessionSecret } from '../../src/http/session.ts';
import { loadSigningKeys } from '../../src/sso/keys.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

/** A JWT signed HS256 with `key` (no kid: "issued before tokens carried one"). */
function forge(claims: Record<string, unknown>, key: Buffer): string {
  const body = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(claims)}`;
  return `${body}.${createHmac('sha256', key).update(body).digest('base64url')}`;
}

/**
 * The development key kept in DATA_DIR/jwt.key (no JWT_SECRET): a file left empty or cut
 * short (a crash between creating it with flag wx and writing it, a full disk) must not
 * become the signing key.
 */
describe('the development key files (jwt.key, session.key)', () => {
  let app: TestApp | undefined;
  afterAll(() => app?.close());

  it('never signs or verifies with a key shorter than 32 bytes read from an empty jwt.key', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-jwtkey-'));
    await writeFile(path.join(dataDir, 'jwt.key'), '');
    const keys = await loadSigningKeys({ JWT_SECRET: undefined, JWT_PREVIOUS_SECRETS: [], DATA_DIR: dataDir, NODE_ENV: 'development' });
    expect(keys.signing.key.symmetricKeySize).toBeGreaterThanOrEqual(32);
  });

  it('does not accept an access token anyone can sign when jwt.key is empty', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-jwtkey-'));
    await writeFile(path.join(dataDir, 'jwt.key'), '');
    app = await startTestApp({ JWT_SECRET: '', DATA_DIR: dataDir });
    const admin = await makeUser(app, { role: 'admin' });
    const now = Math.floor(Date.now() / 1000);
    const forged = forge({ sub: String(admin.id), iss: app.config.ISSUER, aud: 'auth_api', iat: now, exp: now + 600, jti: 'forged-1' }, Buffer.alloc(0));
    const r = await app.http.get('/api/user', { headers: { authorization: `Bearer ${forged}` } });
    expect(r.status, r.text).toBe(401);
  });

  it('replaces a file that holds no key, and keeps one that does', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-jwtkey-'));
    await writeFile(path.join(dataDir, 'session.key'), 'cut-short');
    const secret = loadSessionSecret({ SESSION_SECRET: undefined, DATA_DIR: dataDir });
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect((await readFile(path.join(dataDir, 'session.key'), 'utf8')).trim(), 'the file now holds the key in use').toBe(secret);
    expect(loadSessionSecret({ SESSION_SECRET: undefined, DATA_DIR: dataDir }), 'the next start reads it').toBe(secret);
    expect(await readdir(dataDir), 'no temporary file left').toEqual(['session.key']);
  });

  it('gives every caller the one key that lands in a new file', async () => {
    const file = path.join(await mkdtemp(path.join(os.tmpdir(), 'auth-jwtkey-')), 'nested', 'jwt.key');
    const keys = Array.from({ length: 5 }, () => developmentKey(file));
    expect(new Set(keys).size).toBe(1);
    expect((await readFile(file, 'utf8')).trim()).toBe(keys[0]);
  });
});
