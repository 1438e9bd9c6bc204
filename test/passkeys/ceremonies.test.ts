import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { takeChallenge } from '../../src/passkeys/queries.ts';
import { auditOf, panelSession, signedIn } from '../admin/support.ts';
import { startTestApp, TEST_ENV, type TestApp } from '../helpers/app.ts';
import { admin } from '../helpers/cli.ts';
import { makeUser } from '../helpers/factories.ts';
import { hiddenField } from '../pages/form-session.ts';

const b64 = (n: number) => randomBytes(n).toString('base64url');
/** An assertion of the right shape that no authenticator made. */
const forged = (id = b64(32)) => ({
  id, rawId: id, type: 'public-key', clientExtensionResults: {},
  response: { clientDataJSON: b64(100), authenticatorData: b64(37), signature: b64(70) },
});
/** A passkey row written directly (the key is never checked by these tests). */
async function storedPasskey(app: TestApp, userId: number, name = 'Laptop'): Promise<number> {
  const r = await app.db.query<{ id: number }>(
    'INSERT INTO passkeys (user_id, credential_id, public_key, name) VALUES ($1, $2, $3, $4) RETURNING id', [userId, b64(32), randomBytes(77), name]);
  return Number(r.rows[0].id);
}

describe('passkey ceremonies over HTTP', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ PUBLIC_URL: 'http://localhost:4100' });
  });
  afterAll(() => app.close());

  it('answers sign-in options for a discoverable credential with user verification, and keeps the challenge', async () => {
    const res = await app.http.post('/api/passkeys/authentication/options', {});
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ rpId: 'localhost', userVerification: 'required' });
    expect(res.body.allowCredentials ?? []).toStrictEqual([]);
    const stored = await app.db.query("SELECT purpose, user_id FROM webauthn_challenges WHERE challenge = $1", [res.body.challenge]);
    expect(stored.rows).toStrictEqual([{ purpose: 'authentication', user_id: null }]);
  });

  it('takes a challenge once, and never once it expired', async () => {
    const challenge = b64(32);
    await app.db.query("INSERT INTO webauthn_challenges (challenge, purpose, expires_at) VALUES ($1, 'authentication', now() + interval '1 minute')", [challenge]);
    expect(await takeChallenge(app.db, challenge, 'authentication', null)).toBe(true);
    expect(await takeChallenge(app.db, challenge, 'authentication', null)).toBe(false);
    const old = b64(32);
    await app.db.query("INSERT INTO webauthn_challenges (challenge, purpose, created_at, expires_at) VALUES ($1, 'authentication', now() - interval '6 minutes', now() - interval '1 minute')", [old]);
    expect(await takeChallenge(app.db, old, 'authentication', null)).toBe(false);
  });

  it('refuses an assertion for an unknown credential with the one message, audited', async () => {
    const res = await app.http.post('/api/passkeys/authentication/verify', { response: forged() });
    expect(res.status, res.text).toBe(401);
    expect(res.body).toStrictEqual({ error: 'passkey_refused', message: 'This passkey could not be used to sign in.' });
    const rows = await app.db.query<{ details: any }>("SELECT details FROM audit_log WHERE action = 'user.login' AND outcome = 'failure' ORDER BY id DESC LIMIT 1");
    expect(rows.rows[0].details).toMatchObject({ method: 'passkey', reason: 'unknown_passkey' });
  });

  it('refuses a forged assertion for a known credential as a failed sign-in of its user, counted toward the lock', async () => {
    const user = await makeUser(app);
    const id = await storedPasskey(app, user.id);
    const cred = (await app.db.query<{ credential_id: string }>('SELECT credential_id FROM passkeys WHERE id = $1', [id])).rows[0].credential_id;
    const res = await app.http.post('/api/passkeys/authentication/verify', { response: forged(cred) });
    expect(res.status, res.text).toBe(401);
    expect(res.body.error).toBe('passkey_refused');
    const attempts = await app.db.query<{ failed_count: number }>('SELECT failed_count FROM login_attempts WHERE login = $1', [user.username]);
    expect(attempts.rows[0].failed_count).toBe(1);
  });

  it('refuses the sign-in form\'s passkey step with a malformed assertion, on the page', async () => {
    const user = await makeUser(app);
    const s = (await import('../pages/form-session.ts')).formSession(app.app);
    const page = await s.get('/login');
    expect(page.text).toContain('Sign in with a passkey');
    const res = await s.post('/login', { _csrf: hiddenField(page.text, '_csrf'), step: 'passkey', passkey: '{"id":' });
    expect(res.status).toBe(401);
    expect(res.text).toContain('That passkey could not be used to sign in.');
    expect(user.id).toBeGreaterThan(0);
  });

  it('asks for the session and the current password before a registration, and refuses a forged answer', async () => {
    expect((await app.http.post('/api/passkeys/registration/options', { current_password: 'x' })).status).toBe(401);
    const me = await signedIn(app, 'user');
    const wrong = await app.http.post('/api/passkeys/registration/options', { current_password: 'not the password' }, me.as);
    expect(wrong.status).toBe(401);
    expect(wrong.body.error).toBe('invalid_credentials');
    const ok = await app.http.post('/api/passkeys/registration/options', { current_password: me.user.password }, me.as);
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.authenticatorSelection).toMatchObject({ residentKey: 'required', userVerification: 'required' });
    expect(ok.body.rp).toMatchObject({ id: 'localhost' });
    const id = b64(32);
    const verify = await app.http.post('/api/passkeys/registration/verify', {
      name: 'Fake', response: { id, rawId: id, type: 'public-key', clientExtensionResults: {}, response: { clientDataJSON: b64(100), attestationObject: b64(200) } },
    }, me.as);
    expect(verify.status, verify.text).toBe(400);
    expect(verify.body.error).toBe('passkey_not_registered');
    expect((await app.http.get('/api/user/passkeys', me.as)).body).toStrictEqual({ passkeys: [] });
  });

  it('refuses an eleventh passkey', async () => {
    const me = await signedIn(app, 'user');
    for (let i = 0; i < 10; i++) await storedPasskey(app, me.user.id, `Key ${i}`);
    const res = await app.http.post('/api/passkeys/registration/options', { current_password: me.user.password }, me.as);
    expect(res.status, res.text).toBe(409);
    expect(res.body.error).toBe('passkey_limit');
  });

  it('lets users list and remove their own passkeys, never another\'s', async () => {
    const me = await signedIn(app, 'user');
    const other = await makeUser(app);
    const mine = await storedPasskey(app, me.user.id, 'Mine');
    const theirs = await storedPasskey(app, other.id, 'Theirs');
    const list = await app.http.get('/api/user/passkeys', me.as);
    expect(list.body.passkeys.map((p: { name: string }) => p.name)).toStrictEqual(['Mine']);
    expect((await app.http.delete(`/api/user/passkeys/${theirs}`, me.as)).status).toBe(404);
    expect((await app.http.delete(`/api/user/passkeys/${mine}`, me.as)).status).toBe(200);
    expect((await auditOf(app, 'passkey.removed'))[0]).toMatchObject({ user_id: me.user.id, details: { via: 'api', name: 'Mine' } });
  });

  it('lets administrators list and remove a user\'s passkeys over the API, the panel and the command line, audited', async () => {
    const boss = await signedIn(app, 'admin');
    const user = await makeUser(app);
    const [a, b, c] = [await storedPasskey(app, user.id, 'A'), await storedPasskey(app, user.id, 'B'), await storedPasskey(app, user.id, 'C')];
    const list = await app.http.get(`/api/admin/users/${user.id}/passkeys`, boss.as);
    expect(list.body.passkeys.map((p: { id: number }) => p.id)).toStrictEqual([a, b, c]);
    expect((await app.http.delete(`/api/admin/users/${user.id}/passkeys/${a}`, boss.as)).status).toBe(200);
    expect((await auditOf(app, 'passkey.removed'))[0]).toMatchObject({ user_id: user.id, details: { via: 'admin_api', actor: boss.user.username, passkey_id: a } });

    const panel = await panelSession(app, boss.user);
    const page = await panel.get(`/admin/users/${user.id}`);
    expect(page.text).toMatch(/Passkeys <span class="badge" data-field="passkey-count">2</);
    const removed = await panel.post(`/admin/users/${user.id}/passkeys/${b}/remove`, { _csrf: hiddenField(page.text, '_csrf') });
    expect(removed.status).toBe(303);
    expect((await auditOf(app, 'passkey.removed'))[0]).toMatchObject({ details: { via: 'admin_panel', passkey_id: b } });

    const listed = await admin(app, ['user', 'passkeys', user.username, '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout).passkeys.map((p: { id: number }) => p.id)).toStrictEqual([c]);
    const cli = await admin(app, ['user', 'remove-passkey', user.username, String(c), '--json']);
    expect(cli.code, cli.stderr).toBe(0);
    expect((await auditOf(app, 'passkey.removed'))[0]).toMatchObject({ details: { via: 'cli', passkey_id: c } });
    expect((await app.http.get(`/api/admin/users/${user.id}/passkeys`, boss.as)).body.passkeys).toStrictEqual([]);
    expect((await admin(app, ['user', 'remove-passkey', user.username, String(c)])).code).not.toBe(0);
  });

  it('deletes a user\'s passkeys with the user', async () => {
    const user = await makeUser(app);
    await storedPasskey(app, user.id);
    await app.db.query('DELETE FROM users WHERE id = $1', [user.id]);
    expect((await app.db.query('SELECT 1 FROM passkeys WHERE user_id = $1', [user.id])).rowCount).toBe(0);
  });
});

describe('the relying party in production', () => {
  const production = { ...TEST_ENV, NODE_ENV: 'production', BCRYPT_COST: '10', JWT_SECRET: 'k'.repeat(0) + randomBytes(32).toString('base64'), SESSION_SECRET: randomBytes(32).toString('base64') };
  it('refuses a PUBLIC_URL that is not https, but on localhost', () => {
    expect(() => loadConfig({ ...production, PUBLIC_URL: 'http://sso.example.com' })).toThrow(/PUBLIC_URL: must be https/);
    expect(loadConfig({ ...production, PUBLIC_URL: 'https://sso.example.com' }).PUBLIC_URL).toBe('https://sso.example.com');
    expect(loadConfig({ ...production, PUBLIC_URL: 'http://localhost:3000' }).PUBLIC_URL).toBe('http://localhost:3000');
  });
});
