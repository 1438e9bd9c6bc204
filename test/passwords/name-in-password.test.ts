import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashResetToken } from '../../src/auth/password-service.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { signedIn, type SignedIn } from '../admin/support.ts';
import { signIn } from '../auth/support.ts';

/** Passwords built from the name `alice` or from the email's local part `a.smith` (a user's own, checked on every path). */
const built = (name: string) => [`${name}1`, `${name}12345678`, `My-${name.toUpperCase()}-2026`];

describe('a password must not contain the username or the email local part', () => {
  let app: TestApp;
  let boss: SignedIn;
  beforeAll(async () => {
    app = await startTestApp({ PASSWORD_MIN_LENGTH: '8' });
    boss = await signedIn(app, 'admin');
  });
  afterAll(() => app?.close());

  /** An account named alice… with the email a.smith…@example.com, parts the policy looks for. */
  const names = () => {
    const tail = randomBytes(3).toString('hex');
    return { username: `alice${tail}`, local: `a.smith${tail}` };
  };

  const refusedAs = (res: { status: number; body: any }, what: RegExp) => {
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body.error).toBe('invalid_password');
    expect(res.body.message).toMatch(what);
  };

  it('on user creation (admin API)', async () => {
    const { username, local } = names();
    const create = (password: string) => app.http.post('/api/admin/users', { username, email: `${local}@example.com`, password }, boss.as);
    for (const p of built(username)) refusedAs(await create(p), /must not contain the username/);
    refusedAs(await create(`${local}-2026`), /must not contain the first part of the email address/);
    expect((await create('four unrelated words here')).status).toBe(201);
  });

  it('on a change, a reset and an administrator setting it', async () => {
    const { username, local } = names();
    const user = await makeUser(app, { username, email: `${local}@example.com` });
    for (const p of built(username)) {
      refusedAs(await app.http.post('/api/user/password', { login: username, current_password: user.password, new_password: p }), /contain the username/);
      refusedAs(await app.http.patch(`/api/admin/users/${user.id}`, { password: p }, boss.as), /contain the username/);
      const token = randomBytes(32).toString('base64url');
      await app.db.query("INSERT INTO password_resets (user_id, token_hash, expires_at) VALUES ($1, $2, now() + interval '15 minutes')", [user.id, hashResetToken(token)]);
      refusedAs(await app.http.post('/api/auth/password/reset', { token, new_password: p }), /contain the username/);
    }
    refusedAs(await app.http.patch(`/api/admin/users/${user.id}`, { password: `x${local.toUpperCase()}x9` }, boss.as), /first part of the email/);
    expect((await signIn(app, username, user.password)).res.status, 'the password is unchanged').toBe(200);
  });

  it('leaves parts shorter than 3 characters alone', async () => {
    const tail = randomBytes(3).toString('hex');
    const user = await makeUser(app, { username: `zq${tail}`, email: `ab@${tail}.example.com` });
    // "ab", the email's local part, is too short to count; the username is in no password here
    expect((await app.http.patch(`/api/admin/users/${user.id}`, { password: 'abalone cabinet crab' }, boss.as)).status).toBe(200);
  });
});
