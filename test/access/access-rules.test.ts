import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { admin } from '../helpers/cli.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { adminHeaders } from '../webhooks/receiver.ts';

type Client = Awaited<ReturnType<typeof makeClient>>;
const claimsOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()) as { roles: string[] };

/** Groups and per-client access rules over HTTP and the command line (docs/access.md). */
describe('who may use which client system', () => {
  let app: TestApp;
  let second: TestApp;
  let headers: Record<string, string>;

  beforeAll(async () => {
    app = await startTestApp();
    // a second instance on the same database, with its own client cache
    second = await startTestApp({}, { db: app.db, databaseUrl: app.databaseUrl });
    headers = await adminHeaders(app);
    await app.services.webhooks.register({ url: 'http://127.0.0.1:9/hook', events: ['user.login'], secret: 'sixteen-chars-secret' }, { via: 'cli' });
  });
  afterAll(async () => {
    await second?.stop();
    await app?.close();
  });

  const issue = (a: TestApp, c: Client, username: string) => a.http.post('/api/sso/token', { client_id: c.client_id, client_secret: c.client_secret, username });
  const validate = (a: TestApp, c: Client, token: string) => a.http.post('/api/sso/validate', { client_id: c.client_id, client_secret: c.client_secret, token });
  const cli = async (...args: string[]) => {
    const r = await admin(app, [...args, '--json']);
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout);
  };
  const loginDeliveries = async (userId: number) =>
    (await app.db.query("SELECT 1 FROM webhook_deliveries WHERE event = 'user.login' AND (data->>'user_id')::int = $1", [userId])).rowCount;
  /** A client restricted to a new group, and that group's name. */
  const restricted = async () => {
    const group = unique('finance-');
    await cli('group', 'create', group);
    const client = await makeClient(app, { name: 'Billing' });
    const updated = await cli('client', 'update', client.client_id, '--allow-group', group);
    expect(updated).toMatchObject({ allow_groups: [group], allow_roles: [] });
    return { client, group };
  };

  it('leaves a client without a rule open to every active user, with the role alone in roles', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const r = await issue(app, client, user.username);
    expect(r.status, r.text).toBe(200);
    expect(claimsOf(r.body.token).roles).toStrictEqual(['user']);
    expect((await validate(app, client, r.body.token)).status).toBe(200);
    const detail = await app.http.get(`/api/admin/clients/${client.client_id}`, { headers });
    expect(detail.body).toMatchObject({ allow_groups: [], allow_roles: [], listed: true });
    expect(detail.body.admitted_users).toBeGreaterThanOrEqual(2);
  });

  it('refuses an outsider with 403 access_denied, audited, with no user.login; a member added is admitted at once on both instances', async () => {
    const { client, group } = await restricted();
    const user = await makeUser(app);
    for (const a of [app, second]) {
      const refused = await issue(a, client, user.username);
      expect([refused.status, refused.body.error], refused.text).toStrictEqual([403, 'access_denied']);
      expect(refused.body.message).toBe('You do not have access to Billing');
    }
    const audit = await app.db.query<{ outcome: string; details: { reason: string } }>(
      "SELECT outcome, details FROM audit_log WHERE action = 'token.issue' AND user_id = $1", [user.id]);
    expect(audit.rows.map((r) => [r.outcome, r.details.reason])).toStrictEqual([['failure', 'access_denied'], ['failure', 'access_denied']]);
    expect(await loginDeliveries(user.id)).toBe(0);

    await cli('user', 'add-to-group', user.username, group);
    for (const a of [second, app]) {
      const r = await issue(a, client, user.username);
      expect(r.status, r.text).toBe(200);
      expect(claimsOf(r.body.token).roles, 'the role, then the groups as group:NAME').toStrictEqual(['user', `group:${group}`]);
      expect((await validate(a, client, r.body.token)).status).toBe(200);
    }
    expect(await loginDeliveries(user.id)).toBe(2);
    const detail = await app.http.get(`/api/admin/users/${user.id}`, { headers });
    expect(detail.body.groups).toStrictEqual([group]);
    expect(detail.body.usable_clients).toContain(client.client_id);
    expect((await app.http.get(`/api/admin/clients/${client.client_id}`, { headers })).body.admitted_users).toBe(1);
  });

  it('refuses at validation, with access_denied, a token issued before the user left the group', async () => {
    const { client, group } = await restricted();
    const user = await makeUser(app);
    await cli('user', 'add-to-group', user.username, group);
    const r = await issue(app, client, user.username);
    expect(r.status).toBe(200);
    const out = await app.http.delete(`/api/admin/groups/${group}/members/${user.id}`, { headers });
    expect(out.body).toStrictEqual({ user_id: user.id, group, member: false, changed: true });
    const refused = await validate(second, client, r.body.token);
    expect([refused.status, refused.body.valid, refused.body.error]).toStrictEqual([401, false, 'access_denied']);
    const audit = await app.db.query("SELECT action FROM audit_log WHERE user_id = $1 AND action LIKE 'user.group_%' ORDER BY id", [user.id]);
    expect(audit.rows.map((row) => row.action)).toStrictEqual(['user.group_add', 'user.group_remove']);
  });

  it('admits by role too, and opens the client again with --open-to-all', async () => {
    const client = await makeClient(app);
    const boss = await makeUser(app, { role: 'auditor' });
    const user = await makeUser(app);
    await cli('client', 'update', client.client_id, '--allow-role', 'auditor');
    expect((await issue(second, client, boss.username)).status).toBe(200);
    expect((await issue(second, client, user.username)).status).toBe(403);
    const opened = await cli('client', 'update', client.client_id, '--open-to-all');
    expect(opened).toMatchObject({ allow_groups: [], allow_roles: [] });
    expect((await issue(second, client, user.username)).status).toBe(200);
    const hidden = await app.http.patch(`/api/admin/clients/${client.client_id}`, { listed: false }, { headers });
    expect([hidden.status, hidden.body.listed, hidden.body.allow_roles]).toStrictEqual([200, false, []]);
    const changes = await app.db.query<{ details: { changed: Record<string, unknown>; via: string } }>(
      "SELECT details FROM audit_log WHERE action = 'client.update' AND client_id = $1 ORDER BY id", [client.client_id]);
    expect(changes.rows.map((r) => [r.details.via, r.details.changed])).toStrictEqual([['cli', { allow_roles: ['auditor'] }], ['cli', { allow_roles: [] }], ['admin_api', { listed: false }]]);
  });

  it('refuses a rule naming a group that does not exist, naming it, on every path', async () => {
    const client = await makeClient(app);
    const viaApi = await app.http.patch(`/api/admin/clients/${client.client_id}`, { allow_groups: ['no-such-group'] }, { headers });
    expect(viaApi.status).toBe(400);
    expect(viaApi.body.message).toMatch(/names group "no-such-group", which does not exist/);
    const viaCli = await admin(app, ['client', 'update', client.client_id, '--allow-group', 'no-such-group']);
    expect(viaCli.code).toBe(1);
    expect(viaCli.stderr).toMatch(/no-such-group/);
    await expect(app.db.query("UPDATE clients SET allow_groups = '{no-such-group}' WHERE client_id = $1", [client.client_id])).rejects.toThrow(/no-such-group/);
    expect((await app.http.get(`/api/admin/clients/${client.client_id}`, { headers })).body.allow_groups).toStrictEqual([]);
  });

  it('keeps a group a rule names, and manages groups over the API, audited', async () => {
    const { client, group } = await restricted();
    const del = await app.http.delete(`/api/admin/groups/${group}`, { headers });
    expect([del.status, del.body.error]).toStrictEqual([409, 'group_in_use']);
    expect(del.body.message).toContain(client.client_id);
    const name = unique('eng-');
    const created = await app.http.post('/api/admin/groups', { name }, { headers });
    expect([created.status, created.body.name, created.body.members]).toStrictEqual([201, name, 0]);
    expect((await app.http.post('/api/admin/groups', { name }, { headers })).status).toBe(409);
    expect((await app.http.post('/api/admin/groups', { name: 'Not A Name' }, { headers })).body.error).toBe('invalid_group');
    const user = await makeUser(app);
    expect((await app.http.send(`/api/admin/groups/${name}/members/${user.id}`, { method: 'PUT', headers })).body.changed).toBe(true);
    expect((await app.http.send(`/api/admin/groups/${name}/members/${user.id}`, { method: 'PUT', headers })).body.changed, 'twice is no change').toBe(false);
    expect((await app.http.get(`/api/admin/groups/${name}`, { headers })).body.users).toStrictEqual([{ id: user.id, username: user.username }]);
    const list = await cli('group', 'list');
    expect(list.find((g: { name: string }) => g.name === name)).toMatchObject({ name, members: 1 });
    const gone = await app.http.delete(`/api/admin/groups/${name}`, { headers });
    expect(gone.body).toStrictEqual({ name, deleted: true, members: 1 });
    expect((await app.http.get(`/api/admin/users/${user.id}`, { headers })).body.groups).toStrictEqual([]);
    const audit = await app.db.query<{ action: string }>("SELECT action FROM audit_log WHERE details->>'group' = $1 ORDER BY id", [name]);
    expect(audit.rows.map((r) => r.action)).toStrictEqual(['group.create', 'user.group_add', 'group.delete']);
  });
});
