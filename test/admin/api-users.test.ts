import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { signIn } from '../auth/support.ts';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { auditOf, type SignedIn, signedIn } from './support.ts';

describe('admin API: users', () => {
  let app: TestApp;
  let admin: SignedIn;
  let member: SignedIn;
  before(async () => {
    app = await startTestApp({ LOCKOUT_THRESHOLD: '2' });
    admin = await signedIn(app, 'admin');
    member = await signedIn(app, 'user');
  });
  after(() => app?.close());

  it('POST /api/admin/users creates a user (201) who can sign in; the password is never returned', async () => {
    const username = unique('Ada');
    const res = await app.http.post('/api/admin/users', {
      username, email: `${username}@example.com`, password: 'a long password', full_name: 'Ada Lovelace', role: 'user',
    }, admin.as);
    assert.equal(res.status, 201);
    assert.deepEqual(Object.keys(res.body).sort(), ['active', 'created_at', 'email', 'full_name', 'id', 'locked_until', 'role', 'totp_enabled', 'username']);
    assert.equal(res.body.username, username.toLowerCase());
    assert.equal(res.body.full_name, 'Ada Lovelace');
    assert.equal(res.body.active, true);
    assert.equal(res.body.locked_until, null);
    assert.equal((await signIn(app, username, 'a long password')).res.status, 200);
    const [row] = await auditOf(app, 'user.create');
    assert.equal(row.user_id, res.body.id);
    assert.equal(row.details.actor, admin.user.username);
    assert.ok(!JSON.stringify(row).includes('a long password'));
  });

  it('GET /api/admin/users searches username, email and full name', async () => {
    const tag = unique('zq');
    const byName = await makeUser(app, { username: `${tag}name` });
    const byEmail = await makeUser(app, { email: `someone.${tag}@example.org` });
    const byFullName = await makeUser(app, { fullName: `Grace ${tag.toUpperCase()} Hopper` });
    await makeUser(app);
    const res = await app.http.get(`/api/admin/users?q=${tag}`, admin.as);
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.map((u: { id: number }) => u.id).sort(), [byName.id, byEmail.id, byFullName.id].sort());
    const all = await app.http.get('/api/admin/users', admin.as);
    assert.ok(all.body.length >= 5);
    const literal = await app.http.get('/api/admin/users?q=%25', admin.as);
    assert.deepEqual(literal.body, [], '% is matched literally');
  });

  it('GET /api/admin/users/:id shows the user with their linked client systems', async () => {
    const user = await makeUser(app);
    const client = await makeClient(app, { name: 'Team Wiki' });
    await app.db.query('INSERT INTO user_client_links (user_id, client_id, external_username) VALUES ($1, $2, $3)', [user.id, client.client_id, 'g.hopper']);
    const res = await app.http.get(`/api/admin/users/${user.id}`, admin.as);
    assert.equal(res.status, 200);
    assert.equal(res.body.username, user.username);
    assert.equal(res.body.totp_enabled, false);
    assert.deepEqual(res.body.linked_clients.map((l: any) => [l.client_id, l.client_name, l.external_username]), [[client.client_id, 'Team Wiki', 'g.hopper']]);
  });

  it('PATCH /api/admin/users/:id changes email, full name, role and active; a deactivated user gets no token', async () => {
    const user = await makeUser(app);
    const client = await makeClient(app);
    const res = await app.http.patch(`/api/admin/users/${user.id}`, { email: 'new@example.com', full_name: 'New Name', role: 'admin' }, admin.as);
    assert.equal(res.status, 200);
    assert.equal(res.body.email, 'new@example.com');
    assert.equal(res.body.full_name, 'New Name');
    assert.equal(res.body.role, 'admin');
    const token = () => app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username: user.username });
    assert.equal((await token()).status, 200);
    const off = await app.http.patch(`/api/admin/users/${user.id}`, { active: false }, admin.as);
    assert.equal(off.body.active, false);
    assert.equal((await token()).status, 404);
    assert.equal((await auditOf(app, 'user.deactivate'))[0].user_id, user.id);
    assert.equal((await app.http.patch(`/api/admin/users/${user.id}`, { active: true }, admin.as)).body.active, true);
    assert.equal((await token()).status, 200);
    const [update] = await auditOf(app, 'user.update');
    assert.deepEqual(update.details.changed, { email: 'new@example.com', full_name: 'New Name', role: 'admin' });
    assert.equal(update.details.actor, admin.user.username);
  });

  it('an administrator cannot demote or deactivate themselves', async () => {
    const res = await app.http.patch(`/api/admin/users/${admin.user.id}`, { role: 'user' }, admin.as);
    assert.equal(res.status, 409);
    assert.equal(res.body.error, 'cannot_demote_self');
    assert.equal((await app.http.patch(`/api/admin/users/${admin.user.id}`, { active: false }, admin.as)).status, 409);
  });

  it('POST /api/admin/users/:id/unlock clears a lockout', async () => {
    const user = await makeUser(app);
    for (let i = 0; i < 2; i++) await signIn(app, user.username, 'wrong password!');
    const locked = await app.http.get(`/api/admin/users/${user.id}`, admin.as);
    assert.ok(locked.body.locked_until, 'locked after the threshold');
    assert.equal((await signIn(app, user.username, user.password)).res.status, 423);
    const res = await app.http.post(`/api/admin/users/${user.id}/unlock`, undefined, admin.as);
    assert.equal(res.status, 200);
    assert.equal(res.body.locked_until, null);
    assert.equal((await signIn(app, user.username, user.password)).res.status, 200);
    const [row] = await auditOf(app, 'user.unlock');
    assert.equal(row.user_id, user.id);
    assert.equal(row.details.actor, admin.user.username);
  });

  it('POST /api/admin/users/:id/reset-2fa turns two-factor off and forgets the secret and recovery codes', async () => {
    const user = await makeUser(app);
    await app.db.query("UPDATE users SET totp_enabled = true, totp_secret = 'JBSWY3DPEHPK3PXP' WHERE id = $1", [user.id]);
    await app.db.query("INSERT INTO recovery_codes (user_id, code_hash) VALUES ($1, 'x')", [user.id]);
    assert.equal((await signIn(app, user.username, user.password)).res.status, 401, 'a code is needed');
    const res = await app.http.post(`/api/admin/users/${user.id}/reset-2fa`, undefined, admin.as);
    assert.equal(res.status, 200);
    assert.equal(res.body.totp_enabled, false);
    const row = await app.db.query<{ totp_secret: string | null }>('SELECT totp_secret FROM users WHERE id = $1', [user.id]);
    assert.equal(row.rows[0].totp_secret, null);
    assert.equal((await app.db.query('SELECT 1 FROM recovery_codes WHERE user_id = $1', [user.id])).rowCount, 0);
    assert.equal((await signIn(app, user.username, user.password)).res.status, 200);
    assert.equal((await auditOf(app, 'user.2fa_reset'))[0].details.was_enabled, true);
  });

  it('answers 400 for bad input and 404 for an unknown user', async () => {
    const user = await makeUser(app);
    const bad = async (res: Promise<{ status: number; body: any }>, code: string) => {
      const r = await res;
      assert.equal(r.status, 400, code);
      assert.equal(r.body.error, code);
    };
    await bad(app.http.post('/api/admin/users', { username: 'x' }, admin.as), 'validation_error');
    await bad(app.http.post('/api/admin/users', { username: unique('u'), email: 'not-an-email', password: 'long enough' }, admin.as), 'invalid_email');
    await bad(app.http.post('/api/admin/users', { username: unique('u'), email: 'a@example.com', password: 'short' }, admin.as), 'invalid_password');
    await bad(app.http.post('/api/admin/users', { username: 'has space', email: 'a@example.com', password: 'long enough' }, admin.as), 'invalid_username');
    await bad(app.http.patch(`/api/admin/users/${user.id}`, {}, admin.as), 'validation_error');
    await bad(app.http.patch(`/api/admin/users/${user.id}`, { email: 'nope' }, admin.as), 'invalid_email');
    await bad(app.http.patch(`/api/admin/users/${user.id}`, { role: 'Root!' }, admin.as), 'invalid_role');
    await bad(app.http.patch(`/api/admin/users/${user.id}`, { active: 'no' }, admin.as), 'validation_error');
    await bad(app.http.get('/api/admin/users/abc', admin.as), 'invalid_id');
    await bad(app.http.get('/api/admin/users?limit=0', admin.as), 'validation_error');
    await bad(app.http.get('/api/admin/users?q=%00', admin.as), 'validation_error');
    await bad(app.http.patch(`/api/admin/users/${user.id}`, { full_name: 'a\u0000b' }, admin.as), 'validation_error');
    assert.equal((await app.http.post('/api/admin/users', { username: user.username, email: 'a@example.com', password: 'long enough' }, admin.as)).status, 409);
    assert.equal((await app.http.get('/api/admin/users/999999', admin.as)).status, 404);
    assert.equal((await app.http.patch('/api/admin/users/999999', { full_name: 'x' }, admin.as)).body.error, 'user_not_found');
    assert.equal((await app.http.post('/api/admin/users/999999/unlock', undefined, admin.as)).status, 404);
    assert.equal((await app.http.post('/api/admin/users/999999/reset-2fa', undefined, admin.as)).status, 404);
  });

  it('answers 401 without a session and 403 for a non-admin on every user route', async () => {
    const user = await makeUser(app, { fullName: 'Unchanged Name' });
    const routes: Array<[string, string, unknown?]> = [
      ['GET', '/api/admin/users'],
      ['POST', '/api/admin/users', { username: unique('u'), email: 'a@example.com', password: 'long enough' }],
      ['GET', `/api/admin/users/${user.id}`],
      ['PATCH', `/api/admin/users/${user.id}`, { full_name: 'Changed' }],
      ['POST', `/api/admin/users/${user.id}/unlock`],
      ['POST', `/api/admin/users/${user.id}/reset-2fa`],
    ];
    for (const [method, path, body] of routes) {
      const send = (o = {}) => (method === 'GET' ? app.http.get(path, o) : method === 'PATCH' ? app.http.patch(path, body, o) : app.http.post(path, body, o));
      assert.equal((await send()).status, 401, `${method} ${path} anonymous`);
      const forbidden = await send(member.as);
      assert.equal(forbidden.status, 403, `${method} ${path} non-admin`);
      assert.equal(forbidden.body.error, 'forbidden');
    }
    assert.equal((await app.http.get(`/api/admin/users/${user.id}`, admin.as)).body.full_name, 'Unchanged Name');
  });

  it('every admin route is under the per-user limit of user management', async () => {
    const limited = await startTestApp({ RATE_LIMIT_USER_PER_MIN: '3' });
    try {
      const who = await signedIn(limited, 'admin');
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await limited.http.get('/api/admin/users', who.as)).status);
      assert.deepEqual(statuses, [200, 200, 200, 429]);
      const refused = await limited.http.get('/api/admin/audit', who.as);
      assert.equal(refused.status, 429);
      assert.equal(refused.body.error, 'rate_limited');
      assert.equal((await limited.http.get('/admin', { headers: { cookie: who.cookie, accept: 'text/html' } })).status, 429);
    } finally {
      await limited.close();
    }
  });
});
