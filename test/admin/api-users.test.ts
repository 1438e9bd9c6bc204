import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signIn } from '../auth/support.ts';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { auditOf, type SignedIn, signedIn } from './support.ts';

describe('admin API: users', () => {
  let app: TestApp;
  let admin: SignedIn;
  let member: SignedIn;
  beforeAll(async () => {
    app = await startTestApp({ LOCKOUT_THRESHOLD: '2' });
    admin = await signedIn(app, 'admin');
    member = await signedIn(app, 'user');
  });
  afterAll(() => app?.close());

  it('POST /api/admin/users creates a user (201) who can sign in; the password is never returned', async () => {
    const username = unique('Ada');
    const res = await app.http.post('/api/admin/users', {
      username, email: `${username}@example.com`, password: 'a long password', full_name: 'Ada Lovelace', role: 'user',
    }, admin.as);
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toStrictEqual(['active', 'created_at', 'email', 'full_name', 'id', 'locked_until', 'must_change_password', 'role', 'totp_enabled', 'username']);
    expect(res.body.username).toBe(username.toLowerCase());
    expect(res.body.full_name).toBe('Ada Lovelace');
    expect(res.body.active).toBe(true);
    expect(res.body.locked_until).toBe(null);
    expect((await signIn(app, username, 'a long password')).res.status).toBe(200);
    const [row] = await auditOf(app, 'user.create');
    expect(row.user_id).toBe(res.body.id);
    expect(row.details.actor).toBe(admin.user.username);
    expect(!JSON.stringify(row).includes('a long password')).toBeTruthy();
  });

  it('GET /api/admin/users searches username, email and full name', async () => {
    const tag = unique('zq');
    const byName = await makeUser(app, { username: `${tag}name` });
    const byEmail = await makeUser(app, { email: `someone.${tag}@example.org` });
    const byFullName = await makeUser(app, { fullName: `Grace ${tag.toUpperCase()} Hopper` });
    await makeUser(app);
    const res = await app.http.get(`/api/admin/users?q=${tag}`, admin.as);
    expect(res.status).toBe(200);
    expect(res.body.map((u: { id: number }) => u.id).sort()).toStrictEqual([byName.id, byEmail.id, byFullName.id].sort());
    const all = await app.http.get('/api/admin/users', admin.as);
    expect(all.body.length >= 5).toBeTruthy();
    const literal = await app.http.get('/api/admin/users?q=%25', admin.as);
    expect(literal.body, '% is matched literally').toStrictEqual([]);
  });

  it('GET /api/admin/users/:id shows the user with their linked client systems', async () => {
    const user = await makeUser(app);
    const client = await makeClient(app, { name: 'Team Wiki' });
    await app.db.query('INSERT INTO user_client_links (user_id, client_id, external_username, username_key) VALUES ($1, $2, $3, $3)', [user.id, client.client_id, 'g.hopper']);
    const res = await app.http.get(`/api/admin/users/${user.id}`, admin.as);
    expect(res.status).toBe(200);
    expect(res.body.username).toBe(user.username);
    expect(res.body.totp_enabled).toBe(false);
    expect(res.body.linked_clients.map((l: any) => [l.client_id, l.client_name, l.external_username])).toStrictEqual([[client.client_id, 'Team Wiki', 'g.hopper']]);
  });

  it('PATCH /api/admin/users/:id changes email, full name, role and active; a deactivated user gets no token', async () => {
    const user = await makeUser(app);
    const client = await makeClient(app);
    const res = await app.http.patch(`/api/admin/users/${user.id}`, { email: 'new@example.com', full_name: 'New Name', role: 'admin' }, admin.as);
    expect(res.status).toBe(200);
    expect(res.body.email).toBe('new@example.com');
    expect(res.body.full_name).toBe('New Name');
    expect(res.body.role).toBe('admin');
    const token = () => app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username: user.username });
    const before = await token();
    expect(before.status).toBe(200);
    const off = await app.http.patch(`/api/admin/users/${user.id}`, { active: false }, admin.as);
    expect(off.body.active).toBe(false);
    expect((await token()).status).toBe(404);
    expect((await auditOf(app, 'user.deactivate'))[0].user_id).toBe(user.id);
    expect((await app.http.patch(`/api/admin/users/${user.id}`, { active: true }, admin.as)).body.active).toBe(true);
    expect((await token()).status).toBe(200);
    const stale = await app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token: before.body.token });
    expect(stale.body.error, 'a token issued before the deactivation stays dead').toBe('token_revoked');
    const [update] = await auditOf(app, 'user.update');
    expect(update.details.changed).toStrictEqual({ email: 'new@example.com', full_name: 'New Name', role: 'admin' });
    expect(update.details.actor).toBe(admin.user.username);
  });

  it('PATCH /api/admin/users/:id audits only what changed, the previous role with a new one, and nothing when nothing changed', async () => {
    const user = await makeUser(app, { fullName: 'Same Name' });
    const entries = async () => (await app.db.query<{ action: string; details: any }>(
      "SELECT action, details FROM audit_log WHERE user_id = $1 AND action IN ('user.update', 'user.activate', 'user.deactivate') ORDER BY id",
      [user.id],
    )).rows.map((r) => ({ action: r.action, details: typeof r.details === 'string' ? JSON.parse(r.details) : r.details }));
    const updatedAt = async () => (await app.db.query<{ t: string }>('SELECT updated_at::text AS t FROM users WHERE id = $1', [user.id])).rows[0].t;
    const stamp = await updatedAt();

    const same = await app.http.patch(`/api/admin/users/${user.id}`, { email: user.email, full_name: 'Same Name', role: 'user', active: true }, admin.as);
    expect(same.status).toBe(200);
    expect(await entries(), 'the current values again are no change').toStrictEqual([]);
    expect(await updatedAt()).toBe(stamp);

    expect((await app.http.patch(`/api/admin/users/${user.id}`, { email: user.email, full_name: 'Other Name', role: 'admin' }, admin.as)).status).toBe(200);
    const [update] = await entries();
    expect(update.action).toBe('user.update');
    expect(update.details.changed).toStrictEqual({ full_name: 'Other Name', role: 'admin' });
    expect(update.details.previous_role).toBe('user');

    expect((await app.http.patch(`/api/admin/users/${user.id}`, { full_name: 'Other Name', active: false }, admin.as)).status).toBe(200);
    const deactivated = (await entries())[1];
    expect(deactivated.action, 'only the active flag changed').toBe('user.deactivate');
    expect(deactivated.details.changed).toStrictEqual({ active: false });
    expect(deactivated.details.previous_role).toBeUndefined();
  });

  it('an administrator cannot demote or deactivate themselves', async () => {
    const res = await app.http.patch(`/api/admin/users/${admin.user.id}`, { role: 'user' }, admin.as);
    expect(res.status).toBe(409);
    expect(res.body.error).toBe('cannot_demote_self');
    expect((await app.http.patch(`/api/admin/users/${admin.user.id}`, { active: false }, admin.as)).status).toBe(409);
  });

  it('POST /api/admin/users/:id/unlock clears a lockout', async () => {
    const user = await makeUser(app);
    for (let i = 0; i < 2; i++) await signIn(app, user.username, 'wrong password!');
    const locked = await app.http.get(`/api/admin/users/${user.id}`, admin.as);
    expect(locked.body.locked_until, 'locked after the threshold').toBeTruthy();
    expect((await signIn(app, user.username, user.password)).res.status).toBe(423);
    const res = await app.http.post(`/api/admin/users/${user.id}/unlock`, undefined, admin.as);
    expect(res.status).toBe(200);
    expect(res.body.locked_until).toBe(null);
    expect((await signIn(app, user.username, user.password)).res.status).toBe(200);
    const [row] = await auditOf(app, 'user.unlock');
    expect(row.user_id).toBe(user.id);
    expect(row.details.actor).toBe(admin.user.username);
  });

  it('POST /api/admin/users/:id/reset-2fa turns two-factor off and forgets the secret and recovery codes', async () => {
    const user = await makeUser(app);
    await app.db.query("UPDATE users SET totp_enabled = true, totp_secret = 'JBSWY3DPEHPK3PXP' WHERE id = $1", [user.id]);
    await app.db.query("INSERT INTO recovery_codes (user_id, code_hash) VALUES ($1, 'x')", [user.id]);
    expect((await signIn(app, user.username, user.password)).res.status, 'a code is needed').toBe(401);
    const res = await app.http.post(`/api/admin/users/${user.id}/reset-2fa`, undefined, admin.as);
    expect(res.status).toBe(200);
    expect(res.body.totp_enabled).toBe(false);
    const row = await app.db.query<{ totp_secret: string | null }>('SELECT totp_secret FROM users WHERE id = $1', [user.id]);
    expect(row.rows[0].totp_secret).toBe(null);
    expect((await app.db.query('SELECT 1 FROM recovery_codes WHERE user_id = $1', [user.id])).rowCount).toBe(0);
    expect((await signIn(app, user.username, user.password)).res.status).toBe(200);
    expect((await auditOf(app, 'user.2fa_reset'))[0].details.was_enabled).toBe(true);
  });

  it('answers 400 for bad input and 404 for an unknown user', async () => {
    const user = await makeUser(app);
    const bad = async (res: Promise<{ status: number; body: any }>, code: string) => {
      const r = await res;
      expect(r.status, code).toBe(400);
      expect(r.body.error).toBe(code);
    };
    await bad(app.http.post('/api/admin/users', { username: 'x' }, admin.as), 'validation_error');
    await bad(app.http.post('/api/admin/users', { username: unique('u'), email: 'not-an-email', password: 'long enough' }, admin.as), 'invalid_email');
    await bad(app.http.post('/api/admin/users', { username: unique('u'), email: 'a@example.com', password: 'short' }, admin.as), 'invalid_password');
    await bad(app.http.post('/api/admin/users', { username: 'has space', email: 'a@example.com', password: 'long enough' }, admin.as), 'invalid_username');
    await bad(app.http.patch(`/api/admin/users/${user.id}`, {}, admin.as), 'validation_error');
    await bad(app.http.patch(`/api/admin/users/${user.id}`, { email: 'nope' }, admin.as), 'invalid_email');
    await bad(app.http.patch(`/api/admin/users/${user.id}`, { role: 'Root!' }, admin.as), 'invalid_role');
    // creating checks the role and the name as changing does: "Admin " is no role that silently grants nothing
    await bad(app.http.post('/api/admin/users', { username: unique('u'), email: 'r@example.com', password: 'long enough', role: 'Admin ' }, admin.as), 'invalid_role');
    await bad(app.http.post('/api/admin/users', { username: unique('u'), email: 'n@example.com', password: 'long enough', full_name: 'Line\nBreak' }, admin.as), 'invalid_full_name');
    await bad(app.http.patch(`/api/admin/users/${user.id}`, { full_name: 'Tab\there' }, admin.as), 'invalid_full_name');
    await bad(app.http.patch(`/api/admin/users/${user.id}`, { active: 'no' }, admin.as), 'validation_error');
    await bad(app.http.get('/api/admin/users/abc', admin.as), 'invalid_id');
    await bad(app.http.get('/api/admin/users/0', admin.as), 'invalid_id');
    await bad(app.http.get('/api/admin/users?limit=0', admin.as), 'validation_error');
    await bad(app.http.get('/api/admin/users?q=%00', admin.as), 'validation_error');
    await bad(app.http.patch(`/api/admin/users/${user.id}`, { full_name: 'a\u0000b' }, admin.as), 'validation_error');
    expect((await app.http.post('/api/admin/users', { username: user.username, email: 'a@example.com', password: 'long enough' }, admin.as)).status).toBe(409);
    expect((await app.http.get('/api/admin/users/999999', admin.as)).status).toBe(404);
    expect((await app.http.patch('/api/admin/users/999999', { full_name: 'x' }, admin.as)).body.error).toBe('user_not_found');
    expect((await app.http.post('/api/admin/users/999999/unlock', undefined, admin.as)).status).toBe(404);
    expect((await app.http.post('/api/admin/users/999999/reset-2fa', undefined, admin.as)).status).toBe(404);
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
      expect((await send()).status, `${method} ${path} anonymous`).toBe(401);
      const forbidden = await send(member.as);
      expect(forbidden.status, `${method} ${path} non-admin`).toBe(403);
      expect(forbidden.body.error).toBe('forbidden');
    }
    expect((await app.http.get(`/api/admin/users/${user.id}`, admin.as)).body.full_name).toBe('Unchanged Name');
  });

  it('every admin route is under the per-user limit of user management', async () => {
    const limited = await startTestApp({ RATE_LIMIT_USER_PER_MIN: '3' });
    try {
      const who = await signedIn(limited, 'admin');
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await limited.http.get('/api/admin/users', who.as)).status);
      expect(statuses).toStrictEqual([200, 200, 200, 429]);
      const refused = await limited.http.get('/api/admin/audit', who.as);
      expect(refused.status).toBe(429);
      expect(refused.body.error).toBe('rate_limited');
      expect((await limited.http.get('/admin', { headers: { cookie: who.cookie, accept: 'text/html' } })).status).toBe(429);
    } finally {
      await limited.close();
    }
  });
});

/** Two administrators demoting each other at once: the service never ends with none. */
describe('admin API: the last active administrator', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ RATE_LIMIT_USER_PER_MIN: '1000' });
  });
  afterAll(() => app?.close());

  const activeAdmins = async () =>
    (await app.db.query<{ n: number }>("SELECT count(*)::int AS n FROM users WHERE role = 'admin' AND active")).rows[0].n;

  it('lets one of two crossed demotions (or deactivations) through and refuses the other', async () => {
    for (let round = 0; round < 8; round++) {
      // two fresh administrators, the only ones
      await app.db.query("UPDATE users SET role = 'user' WHERE role = 'admin'");
      const a = await signedIn(app, 'admin');
      const b = await signedIn(app, 'admin');
      expect(await activeAdmins()).toBe(2);
      const change = round % 2 === 0 ? { role: 'user' } : { active: false };
      const [ab, ba] = await Promise.all([
        app.http.patch(`/api/admin/users/${b.user.id}`, change, a.as),
        app.http.patch(`/api/admin/users/${a.user.id}`, change, b.as),
      ]);
      expect(await activeAdmins(), `round ${round}: ${ab.status} ${ab.text} / ${ba.status} ${ba.text}`).toBe(1);
      expect([ab.status, ba.status].filter((s) => s === 200)).toHaveLength(1);
      // the other was refused as no longer an administrator (403, or 401 once deactivated)
      // or, having passed that check first, as the last one (409 last_admin)
      const loser = ab.status === 200 ? ba : ab;
      expect([401, 403, 409], loser.text).toContain(loser.status);
      if (loser.status === 409) expect(loser.body.error).toBe('last_admin');
    }
  });
});
