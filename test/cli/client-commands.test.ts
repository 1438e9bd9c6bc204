import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashClientSecret } from '../../src/clients/credentials.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { admin } from '../helpers/cli.ts';
import { makeUser } from '../helpers/factories.ts';
import { deliveries, subscribe } from '../auth/support.ts';
import { auditOf } from '../admin/support.ts';

/** The command line's client commands that came with seeds: new-secret and update. */
describe('admin command line: client new-secret and client update', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());

  it('client new-secret prints a fresh secret and its secret_hash, and stores nothing', async () => {
    const clients = async () => (await app.db.query('SELECT count(*)::int AS n FROM clients')).rows[0];
    const before = await clients();
    const json = await admin(app, ['client', 'new-secret', '--json']);
    expect(json.code, json.stderr).toBe(0);
    const doc = JSON.parse(json.stdout);
    expect(Object.keys(doc).sort()).toStrictEqual(['client_secret', 'secret_hash']);
    expect(doc.client_secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(doc.secret_hash).toBe(hashClientSecret(doc.client_secret));
    expect(doc.secret_hash).toMatch(/^[0-9a-f]{64}$/);

    const text = await admin(app, ['client', 'new-secret']);
    expect(text.code).toBe(0);
    const [, secret] = /client_secret: (\S+)/.exec(text.stdout) ?? [];
    expect(text.stdout).toContain(`secret_hash:   ${hashClientSecret(secret)}`);
    expect(secret, 'a fresh secret each time').not.toBe(doc.client_secret);
    expect(await clients()).toStrictEqual(before);
    const stored = await app.db.query(`SELECT count(*)::int AS n FROM audit_log WHERE details::text LIKE '%' || $1 || '%'`, [doc.client_secret]);
    expect(stored.rows[0]).toStrictEqual({ n: 0 });
  });

  it('client update changes name, callback and active, each change audited once, and the service uses it at once', async () => {
    const created = JSON.parse((await admin(app, ['client', 'create', '--name', 'Before', '--callback-url', 'https://before.example/cb', '--allow-ip', '127.0.0.1', '--id', 'cli-update', '--json'])).stdout);
    const { username } = await makeUser(app);
    const token = () => app.http.post('/api/sso/token', { client_id: 'cli-update', client_secret: created.client_secret, username }, { localAddress: '127.0.0.1' });

    const r = await admin(app, ['client', 'update', 'cli-update', '--name', 'After', '--callback-url', 'https://after.example/cb', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ client_id: 'cli-update', client_name: 'After', callback_url: 'https://after.example/cb', active: true, allowed_ips: ['127.0.0.1'] });
    expect((await token()).body.redirect_url).toMatch(/^https:\/\/after\.example\/cb\?token=/);

    const off = await admin(app, ['client', 'update', 'cli-update', '--active', 'false']);
    expect(off.code, off.stderr).toBe(0);
    expect(off.stdout).toContain('inactive');
    expect((await token()).status).toBe(401);
    expect((await admin(app, ['client', 'update', 'cli-update', '--active', 'true'])).code).toBe(0);
    expect((await token()).status).toBe(200);

    const updates = (await auditOf(app, 'client.update')).filter((row) => row.client_id === 'cli-update');
    expect(updates.map((row) => row.details.changed)).toStrictEqual([
      { active: true }, { active: false }, { client_name: 'After', callback_url: 'https://after.example/cb' },
    ]);
    expect(updates.every((row) => row.details.via === 'cli')).toBe(true);
  });

  it('client update refuses bad values with a message on stderr and a non-zero exit', async () => {
    await admin(app, ['client', 'create', '--name', 'Strict', '--callback-url', 'https://strict.example/cb', '--id', 'cli-strict']);
    const js = await admin(app, ['client', 'update', 'cli-strict', '--callback-url', 'javascript:alert(1)']);
    expect(js.code).not.toBe(0);
    expect(js.stdout).toBe('');
    expect(js.stderr).toMatch(/callback_url/);
    const active = await admin(app, ['client', 'update', 'cli-strict', '--active', 'maybe']);
    expect(active.code).toBe(2);
    expect(active.stderr).toContain('--active true|false');
    const nothing = await admin(app, ['client', 'update', 'cli-strict']);
    expect(nothing.code).toBe(2);
    const unknown = await admin(app, ['client', 'update', 'no-such-client', '--name', 'X']);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain('no-such-client');
    const badId = await admin(app, ['client', 'create', '--name', 'Bad', '--callback-url', 'https://x.example/', '--id', 'Bad Id']);
    expect(badId.code).not.toBe(0);
    expect(badId.stderr).toMatch(/client_id/);
    // the service has no length rule for a name from the command line; the database's answer is still bad input
    const long = await admin(app, ['client', 'create', '--name', 'n'.repeat(201), '--callback-url', 'https://x.example/']);
    expect(long.code).toBe(1);
    expect(long.stderr).toMatch(/client_name .* must be 1-200 characters/);
    expect(long.stderr).not.toMatch(/^admin:/);
  });

  it('0.0.0.0/0 is refused without --allow-everything, and the message and --help say how to confirm it', async () => {
    const refused = await admin(app, ['client', 'create', '--name', 'Open', '--callback-url', 'https://open.example/cb', '--allow-ip', '0.0.0.0/0', '--id', 'cli-open']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe('0.0.0.0/0 admits every address; confirm to save it (pass --allow-everything)\n');
    const help = await admin(app, ['--help']);
    expect(help.stdout + help.stderr).toMatch(/client create [^\n]*\[--allow-everything\]/);
    const created = await admin(app, ['client', 'create', '--name', 'Open', '--callback-url', 'https://open.example/cb', '--allow-ip', '0.0.0.0/0', '--id', 'cli-open', '--allow-everything', '--json']);
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout).allowed_ips).toStrictEqual(['0.0.0.0/0']);
  });

  it('a client created by the command line is audited and announced exactly once (by the database, not twice)', async () => {
    const hook = await subscribe(app, ['client.registered']);
    const r = await admin(app, ['client', 'create', '--name', 'Once', '--callback-url', 'https://once.example/cb', '--id', 'cli-once']);
    expect(r.code, r.stderr).toBe(0);
    expect(await deliveries(app, hook, 'client.registered')).toStrictEqual([{ client_id: 'cli-once', client_name: 'Once' }]);
    const rows = (await auditOf(app, 'client.create')).filter((row) => row.client_id === 'cli-once');
    expect(rows).toHaveLength(1);
    expect(rows[0].details).toMatchObject({ via: 'cli', actor: 'cli' });
  });
});
