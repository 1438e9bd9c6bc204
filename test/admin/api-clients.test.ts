import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';
import { deliveries, subscribe } from '../auth/support.ts';
import { auditOf, type SignedIn, signedIn } from './support.ts';

describe('admin API: client systems', () => {
  let app: TestApp;
  let admin: SignedIn;
  let member: SignedIn;
  before(async () => {
    app = await startTestApp();
    admin = await signedIn(app, 'admin');
    member = await signedIn(app, 'user');
  });
  after(() => app?.close());

  const create = (body: Record<string, unknown> = {}) =>
    app.http.post('/api/admin/clients', { client_name: unique('CRM '), callback_url: 'https://crm.example/cb', allowed_ips: ['127.0.0.1'], ...body }, admin.as);

  it('POST /api/admin/clients answers 201 with the secret once; GET lists and shows it masked', async () => {
    const hook = await subscribe(app, ['client.registered']);
    const res = await create({ client_name: 'Billing' });
    assert.equal(res.status, 201);
    assert.equal(res.headers['cache-control'], 'no-store');
    const { client_id, client_secret } = res.body;
    assert.match(client_secret, /^[A-Za-z0-9_-]{43}$/);
    assert.equal(res.body.client_name, 'Billing');
    assert.deepEqual(res.body.allowed_ips, ['127.0.0.1']);
    assert.equal(res.body.active, true);

    const list = await app.http.get('/api/admin/clients', admin.as);
    assert.equal(list.status, 200);
    const listed = list.body.find((c: { client_id: string }) => c.client_id === client_id);
    assert.ok(listed);
    assert.equal(listed.client_secret, `••••••••${client_secret.slice(-4)}`);
    assert.ok(!list.text.includes(client_secret), 'the plain secret is never listed');

    const one = await app.http.get(`/api/admin/clients/${client_id}`, admin.as);
    assert.equal(one.status, 200);
    assert.equal(one.body.client_secret, listed.client_secret);
    assert.equal(one.body.callback_url, 'https://crm.example/cb');

    const [row] = await auditOf(app, 'client.create');
    assert.equal(row.client_id, client_id);
    assert.equal(row.details.actor, admin.user.username);
    assert.equal(row.details.via, 'admin_api');
    const sent = await deliveries(app, hook, 'client.registered');
    assert.deepEqual(sent.map((d) => d.client_id), [client_id], 'client.registered is sent');
  });

  it('the new secret works at the token endpoint; rotate-secret returns a new one and the old fails at once', async () => {
    const user = await makeUser(app);
    const created = (await create()).body;
    const token = (secret: string) => app.http.post('/api/sso/token', { client_id: created.client_id, client_secret: secret, username: user.username });
    assert.equal((await token(created.client_secret)).status, 200);

    const rotated = await app.http.post(`/api/admin/clients/${created.client_id}/rotate-secret`, undefined, admin.as);
    assert.equal(rotated.status, 200);
    assert.equal(rotated.body.client_id, created.client_id);
    assert.notEqual(rotated.body.client_secret, created.client_secret);
    assert.equal((await token(created.client_secret)).status, 401);
    assert.equal((await token(rotated.body.client_secret)).status, 200);
    const [row] = await auditOf(app, 'client.rotate_secret');
    assert.equal(row.client_id, created.client_id);
    assert.equal(row.details.actor, admin.user.username);
    assert.ok(!JSON.stringify(row).includes(rotated.body.client_secret), 'no secret in the audit log');
  });

  it('PATCH changes name, callback, allow list and active; the allow list applies to the next request', async () => {
    const user = await makeUser(app);
    const created = (await create({ allowed_ips: ['127.0.0.2'] })).body;
    const token = (localAddress: string) =>
      app.http.post('/api/sso/token', { client_id: created.client_id, client_secret: created.client_secret, username: user.username }, { localAddress });
    assert.equal((await token('127.0.0.3')).status, 403);

    const patched = await app.http.patch(`/api/admin/clients/${created.client_id}`, {
      client_name: 'Renamed', callback_url: 'https://renamed.example/cb', allowed_ips: ['127.0.0.3', '10.0.0.0/8'],
    }, admin.as);
    assert.equal(patched.status, 200);
    assert.equal(patched.body.client_name, 'Renamed');
    assert.deepEqual(patched.body.allowed_ips, ['127.0.0.3', '10.0.0.0/8']);
    assert.equal((await token('127.0.0.3')).status, 200);
    assert.equal((await token('127.0.0.2')).status, 403);

    const off = await app.http.patch(`/api/admin/clients/${created.client_id}`, { active: false }, admin.as);
    assert.equal(off.body.active, false);
    assert.equal((await token('127.0.0.3')).status, 401, 'an inactive client is refused');
    const on = await app.http.patch(`/api/admin/clients/${created.client_id}`, { active: true }, admin.as);
    assert.equal(on.body.active, true);
    assert.equal((await token('127.0.0.3')).status, 200);
    const [row] = await auditOf(app, 'client.update');
    assert.equal(row.details.actor, admin.user.username);
  });

  it('refuses bad allow-list entries naming them, and allow-everything without the confirm flag', async () => {
    const created = (await create()).body;
    const bad = await app.http.patch(`/api/admin/clients/${created.client_id}`, { allowed_ips: ['10.0.0.1', '300.1.1.1', 'example.com'] }, admin.as);
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error, 'invalid_allowed_ips');
    assert.deepEqual(bad.body.invalid, ['300.1.1.1', 'example.com']);
    assert.match(bad.body.message, /300\.1\.1\.1, example\.com/);

    const everything = await app.http.patch(`/api/admin/clients/${created.client_id}`, { allowed_ips: ['0.0.0.0/0'] }, admin.as);
    assert.equal(everything.status, 400);
    assert.equal(everything.body.error, 'allow_everything_unconfirmed');
    const confirmed = await app.http.patch(`/api/admin/clients/${created.client_id}`, { allowed_ips: ['0.0.0.0/0'], allow_everything: true }, admin.as);
    assert.equal(confirmed.status, 200);
    assert.deepEqual(confirmed.body.allowed_ips, ['0.0.0.0/0']);
    const unchanged = await app.http.get(`/api/admin/clients/${created.client_id}`, admin.as);
    assert.deepEqual(unchanged.body.allowed_ips, ['0.0.0.0/0']);

    const creating = await create({ allowed_ips: ['::/0'] });
    assert.equal(creating.status, 400);
    assert.equal(creating.body.error, 'allow_everything_unconfirmed');
  });

  it('answers 400 for bad input and 404 for an unknown client', async () => {
    assert.equal((await app.http.post('/api/admin/clients', { client_name: '' }, admin.as)).body.error, 'validation_error');
    assert.equal((await app.http.post('/api/admin/clients', { client_name: 'x', callback_url: 'ftp://x' }, admin.as)).body.error, 'invalid_callback_url');
    assert.equal((await app.http.post('/api/admin/clients', { client_name: 'x', callback_url: 'https://x', bogus: 1 }, admin.as)).status, 400);
    const created = (await create()).body;
    const empty = await app.http.patch(`/api/admin/clients/${created.client_id}`, {}, admin.as);
    assert.equal(empty.status, 400);
    assert.equal(empty.body.error, 'validation_error');
    assert.equal((await app.http.patch(`/api/admin/clients/${created.client_id}`, { active: 'yes' }, admin.as)).status, 400);
    assert.equal((await app.http.get('/api/admin/clients/no-such-client', admin.as)).status, 404);
    assert.equal((await app.http.get('/api/admin/clients/a%00b', admin.as)).status, 400, 'a NUL in the id is bad input, not a database error');
    assert.equal((await app.http.post('/api/admin/clients', { client_name: 'a\u0000b', callback_url: 'https://x.example/' }, admin.as)).body.error, 'validation_error');
    assert.equal((await app.http.patch(`/api/admin/clients/${created.client_id}`, { allowed_ips: ['10.0.0.1\u0000'] }, admin.as)).body.error, 'validation_error');
    assert.equal((await app.http.patch('/api/admin/clients/no-such-client', { active: false }, admin.as)).body.error, 'client_not_found');
    assert.equal((await app.http.post('/api/admin/clients/no-such-client/rotate-secret', undefined, admin.as)).status, 404);
    const taken = await create({ client_id: created.client_id });
    assert.equal(taken.status, 409);
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
      assert.equal(anonymous.status, 401, `${method} ${path} anonymous`);
      assert.equal(anonymous.body.error, 'unauthenticated');
      const forbidden = await send(member.as);
      assert.equal(forbidden.status, 403, `${method} ${path} non-admin`);
      assert.equal(forbidden.body.error, 'forbidden');
    }
    const still = await app.http.get(`/api/admin/clients/${created.client_id}`, admin.as);
    assert.equal(still.body.active, true, 'refused calls changed nothing');
    assert.equal(still.body.client_secret, created.client_secret.replace(/^.*(.{4})$/, '••••••••$1'));
  });

  it('accepts an admin bearer access token from POST /api/login', async () => {
    const user = await makeUser(app, { role: 'admin' });
    const login = await app.http.post('/api/login', { username: user.username, password: user.password });
    assert.equal(login.status, 200);
    const res = await app.http.get('/api/admin/clients', { headers: { authorization: `Bearer ${login.body.token}` } });
    assert.equal(res.status, 200);
    assert.ok(Array.isArray(res.body));
  });
});
