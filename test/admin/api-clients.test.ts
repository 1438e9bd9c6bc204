import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { deliveries, subscribe } from '../auth/support.ts';
import { auditOf, type SignedIn, signedIn } from './support.ts';

describe('admin API: client systems', () => {
  let app: TestApp;
  let admin: SignedIn;
  let member: SignedIn;
  beforeAll(async () => {
    app = await startTestApp();
    admin = await signedIn(app, 'admin');
    member = await signedIn(app, 'user');
  });
  afterAll(() => app?.close());

  const create = (body: Record<string, unknown> = {}) =>
    app.http.post('/api/admin/clients', { client_name: unique('CRM '), callback_url: 'https://crm.example/cb', allowed_ips: ['127.0.0.1'], ...body }, admin.as);

  it('POST /api/admin/clients answers 201 with the secret once; GET lists and shows it masked', async () => {
    const hook = await subscribe(app, ['client.registered']);
    const res = await create({ client_name: 'Billing' });
    expect(res.status).toBe(201);
    expect(res.headers['cache-control']).toBe('no-store');
    const { client_id, client_secret } = res.body;
    expect(client_secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(res.body.client_name).toBe('Billing');
    expect(res.body.allowed_ips).toStrictEqual(['127.0.0.1']);
    expect(res.body.active).toBe(true);

    const list = await app.http.get('/api/admin/clients', admin.as);
    expect(list.status).toBe(200);
    const listed = list.body.find((c: { client_id: string }) => c.client_id === client_id);
    expect(listed).toBeTruthy();
    expect(listed.client_secret).toBe(`••••••••${client_secret.slice(-4)}`);
    expect(!list.text.includes(client_secret), 'the plain secret is never listed').toBeTruthy();

    const one = await app.http.get(`/api/admin/clients/${client_id}`, admin.as);
    expect(one.status).toBe(200);
    expect(one.body.client_secret).toBe(listed.client_secret);
    expect(one.body.callback_url).toBe('https://crm.example/cb');

    const [row] = await auditOf(app, 'client.create');
    expect(row.client_id).toBe(client_id);
    expect(row.details.actor).toBe(admin.user.username);
    expect(row.details.via).toBe('admin_api');
    const sent = await deliveries(app, hook, 'client.registered');
    expect(sent.map((d) => d.client_id), 'client.registered is sent').toStrictEqual([client_id]);
  });

  it('the new secret works at the token endpoint; rotate-secret returns a new one and the old fails at once', async () => {
    const user = await makeUser(app);
    const created = (await create()).body;
    const token = (secret: string) => app.http.post('/api/sso/token', { client_id: created.client_id, client_secret: secret, username: user.username });
    expect((await token(created.client_secret)).status).toBe(200);

    const rotated = await app.http.post(`/api/admin/clients/${created.client_id}/rotate-secret`, undefined, admin.as);
    expect(rotated.status).toBe(200);
    expect(rotated.body.client_id).toBe(created.client_id);
    expect(rotated.body.client_secret).not.toBe(created.client_secret);
    expect((await token(created.client_secret)).status).toBe(401);
    expect((await token(rotated.body.client_secret)).status).toBe(200);
    const [row] = await auditOf(app, 'client.rotate_secret');
    expect(row.client_id).toBe(created.client_id);
    expect(row.details.actor).toBe(admin.user.username);
    expect(!JSON.stringify(row).includes(rotated.body.client_secret), 'no secret in the audit log').toBeTruthy();
  });

  it('PATCH changes name, callback, allow list and active; the allow list applies to the next request', async () => {
    const user = await makeUser(app);
    const created = (await create({ allowed_ips: ['127.0.0.2'] })).body;
    const token = (localAddress: string) =>
      app.http.post('/api/sso/token', { client_id: created.client_id, client_secret: created.client_secret, username: user.username }, { localAddress });
    expect((await token('127.0.0.3')).status).toBe(403);

    const patched = await app.http.patch(`/api/admin/clients/${created.client_id}`, {
      client_name: 'Renamed', callback_url: 'https://renamed.example/cb', allowed_ips: ['127.0.0.3', '10.0.0.0/8'],
    }, admin.as);
    expect(patched.status).toBe(200);
    expect(patched.body.client_name).toBe('Renamed');
    expect(patched.body.allowed_ips).toStrictEqual(['127.0.0.3', '10.0.0.0/8']);
    expect((await token('127.0.0.3')).status).toBe(200);
    expect((await token('127.0.0.2')).status).toBe(403);

    const off = await app.http.patch(`/api/admin/clients/${created.client_id}`, { active: false }, admin.as);
    expect(off.body.active).toBe(false);
    expect((await token('127.0.0.3')).status, 'an inactive client is refused').toBe(401);
    const on = await app.http.patch(`/api/admin/clients/${created.client_id}`, { active: true }, admin.as);
    expect(on.body.active).toBe(true);
    expect((await token('127.0.0.3')).status).toBe(200);
    const [row] = await auditOf(app, 'client.update');
    expect(row.details.actor).toBe(admin.user.username);
  });

  it('refuses bad allow-list entries naming them, and allow-everything without the confirm flag', async () => {
    const created = (await create()).body;
    const bad = await app.http.patch(`/api/admin/clients/${created.client_id}`, { allowed_ips: ['10.0.0.1', '300.1.1.1', 'example.com'] }, admin.as);
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('invalid_allowed_ips');
    expect(bad.body.invalid).toStrictEqual(['300.1.1.1', 'example.com']);
    expect(bad.body.message).toMatch(/300\.1\.1\.1, example\.com/);

    const everything = await app.http.patch(`/api/admin/clients/${created.client_id}`, { allowed_ips: ['0.0.0.0/0'] }, admin.as);
    expect(everything.status).toBe(400);
    expect(everything.body.error).toBe('allow_everything_unconfirmed');
    const confirmed = await app.http.patch(`/api/admin/clients/${created.client_id}`, { allowed_ips: ['0.0.0.0/0'], allow_everything: true }, admin.as);
    expect(confirmed.status).toBe(200);
    expect(confirmed.body.allowed_ips).toStrictEqual(['0.0.0.0/0']);
    const unchanged = await app.http.get(`/api/admin/clients/${created.client_id}`, admin.as);
    expect(unchanged.body.allowed_ips).toStrictEqual(['0.0.0.0/0']);

    const creating = await create({ allowed_ips: ['::/0'] });
    expect(creating.status).toBe(400);
    expect(creating.body.error).toBe('allow_everything_unconfirmed');
  });

  it('answers 400 for bad input and 404 for an unknown client', async () => {
    expect((await app.http.post('/api/admin/clients', { client_name: '' }, admin.as)).body.error).toBe('validation_error');
    expect((await app.http.post('/api/admin/clients', { client_name: 'x', callback_url: 'ftp://x' }, admin.as)).body.error).toBe('invalid_callback_url');
    expect((await app.http.post('/api/admin/clients', { client_name: 'x', callback_url: 'https://x', bogus: 1 }, admin.as)).status).toBe(400);
    const created = (await create()).body;
    const empty = await app.http.patch(`/api/admin/clients/${created.client_id}`, {}, admin.as);
    expect(empty.status).toBe(400);
    expect(empty.body.error).toBe('validation_error');
    expect((await app.http.patch(`/api/admin/clients/${created.client_id}`, { active: 'yes' }, admin.as)).status).toBe(400);
    expect((await app.http.get('/api/admin/clients/no-such-client', admin.as)).status).toBe(404);
    expect((await app.http.get('/api/admin/clients/a%00b', admin.as)).status, 'a NUL in the id is bad input, not a database error').toBe(400);
    expect((await app.http.post('/api/admin/clients', { client_name: 'a\u0000b', callback_url: 'https://x.example/' }, admin.as)).body.error).toBe('validation_error');
    expect((await app.http.patch(`/api/admin/clients/${created.client_id}`, { allowed_ips: ['10.0.0.1\u0000'] }, admin.as)).body.error).toBe('validation_error');
    expect((await app.http.patch('/api/admin/clients/no-such-client', { active: false }, admin.as)).body.error).toBe('client_not_found');
    expect((await app.http.post('/api/admin/clients/no-such-client/rotate-secret', undefined, admin.as)).status).toBe(404);
    const taken = await create({ client_id: created.client_id });
    expect(taken.status).toBe(409);
  });

  it('answers 401 without a session and 403 for a non-admin on every client route', async () => {
    const created = (await create()).body;
    const routes: Array<[string, string, unknown?]> = [
      ['GET', '/api/admin/clients'],
      ['POST', '/api/admin/clients', { client_name: 'x', callback_url: 'https://x.example/' }],
      ['GET', `/api/admin/clients/${created.client_id}`],
      ['PATCH', `/api/admin/clients/${created.client_id}`, { active: false }],
      ['POST', `/api/admin/clients/${created.client_id}/rotate-secret`],
    ];
    for (const [method, path, body] of routes) {
      const send = (o = {}) => (method === 'GET' ? app.http.get(path, o) : method === 'PATCH' ? app.http.patch(path, body, o) : app.http.post(path, body, o));
      const anonymous = await send();
      expect(anonymous.status, `${method} ${path} anonymous`).toBe(401);
      expect(anonymous.body.error).toBe('unauthenticated');
      const forbidden = await send(member.as);
      expect(forbidden.status, `${method} ${path} non-admin`).toBe(403);
      expect(forbidden.body.error).toBe('forbidden');
    }
    const still = await app.http.get(`/api/admin/clients/${created.client_id}`, admin.as);
    expect(still.body.active, 'refused calls changed nothing').toBe(true);
    expect(still.body.client_secret).toBe(created.client_secret.replace(/^.*(.{4})$/, '••••••••$1'));
  });

  it('accepts an admin bearer access token from POST /api/login', async () => {
    const user = await makeUser(app, { role: 'admin' });
    const login = await app.http.post('/api/login', { username: user.username, password: user.password });
    expect(login.status).toBe(200);
    const res = await app.http.get('/api/admin/clients', { headers: { authorization: `Bearer ${login.body.token}` } });
    expect(res.status).toBe(200);
    expect(Array.isArray(res.body)).toBeTruthy();
  });
});

/** Creations racing for one name: the check before the insert cannot see a row another request has not committed yet. */
describe('admin API: creating the same client or user at once', () => {
  let app: TestApp;
  let admin: SignedIn;
  beforeAll(async () => {
    app = await startTestApp({ RATE_LIMIT_USER_PER_MIN: '1000' });
    admin = await signedIn(app, 'admin');
  });
  afterAll(() => app?.close());

  it('answers one 201 and 409s, never a 500, for 20 creations of one client id or one username', async () => {
    for (let round = 0; round < 3; round++) {
      const clientId = unique('race').toLowerCase().replace(/[^a-z0-9_-]/g, '');
      const clients = await Promise.all(Array.from({ length: 20 }, () =>
        app.http.post('/api/admin/clients', { client_id: clientId, client_name: 'Race', callback_url: 'https://race.example/cb' }, admin.as)));
      expect(clients.map((r) => r.status).sort(), clients.filter((r) => r.status !== 409).map((r) => r.text).join('\n')).toStrictEqual([201, ...Array(19).fill(409)]);
      for (const r of clients.filter((c) => c.status === 409)) expect(r.body.error).toBe('client_exists');

      const username = unique('racer').toLowerCase();
      const users = await Promise.all(Array.from({ length: 20 }, (_, i) =>
        app.http.post('/api/admin/users', { username, email: `racer${i}@example.com`, password: 'a long enough passphrase' }, admin.as)));
      expect(users.map((r) => r.status).sort(), users.filter((r) => r.status !== 409).map((r) => r.text).join('\n')).toStrictEqual([201, ...Array(19).fill(409)]);
      for (const r of users.filter((u) => u.status === 409)) expect(r.body.error).toBe('username_taken');
    }
  });
});
