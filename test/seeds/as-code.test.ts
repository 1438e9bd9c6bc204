import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashClientSecret } from '../../src/clients/credentials.ts';
import { applySeeds } from '../../src/seeds/apply.ts';
import { verifyWebhook } from '../../src/webhooks/verify.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { admin } from '../helpers/cli.ts';
import { signedIn } from '../admin/support.ts';
import { startReceiver } from '../webhooks/receiver.ts';
import { projectWith, seed, type SeedClient, seedSql } from './support.ts';

/** docs/clients-as-code.md: plan, check, prune, export and webhooks as code, on a database of their own. */
describe('client systems as code', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());

  const billing: SeedClient = { id: 'billing', name: 'Billing', callback: 'https://billing.example/cb', ips: ['10.20.0.0/16', '192.0.2.10'], secret: 'billing-secret-1' };
  const wiki: SeedClient = { id: 'wiki', name: 'Team wiki', callback: 'https://wiki.example/cb', ips: ['2001:db8:42::/48'], secret: 'wiki-secret-1' };
  const counts = async (t: TestApp = app) => (await t.db.query<{ clients: number; audit: number; deliveries: number; webhooks: number }>(
    `SELECT (SELECT count(*)::int FROM clients) AS clients, (SELECT count(*)::int FROM audit_log) AS audit,
            (SELECT count(*)::int FROM webhook_deliveries) AS deliveries, (SELECT count(*)::int FROM webhooks) AS webhooks`)).rows[0];
  const rows = async (t: TestApp = app) => (await t.db.query(
    'SELECT client_id, client_name, callback_url, allowed_ips, active, secret_hash, logo_url, previous_secret_hash, previous_secret_expires_at, updated_at FROM clients ORDER BY client_id')).rows;
  const files = async (sql: string) => projectWith({ 'seeds/clients.sql': sql });

  it('--plan prints every change (each changed column, old -> new, secrets only "changed") and writes, audits and announces nothing', async () => {
    expect((await seed(app, await files(seedSql([billing])))).code).toBe(0);
    const before = { counts: await counts(), rows: await rows() };
    const edited = seedSql([{ ...billing, name: 'Billing 2', secret: 'billing-secret-2', ips: ['10.20.0.0/16'] }, wiki]);
    const plan = await seed(app, await files(edited), ['--plan']);
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stdout).toBe([
      'Plan for seeds/clients.sql (nothing was applied):',
      '  billing: changed',
      '    client_name: "Billing" -> "Billing 2"',
      '    secret_hash: changed',
      '    allowed_ips: ["10.20.0.0/16","192.0.2.10"] -> ["10.20.0.0/16"]',
      '  wiki: created',
      '    client_name: "Team wiki"',
      '    secret_hash: set',
      '    callback_url: "https://wiki.example/cb"',
      '    allowed_ips: ["2001:db8:42::/48"]',
      '    active: true',
      '    previous_secret_hash: null',
      '    previous_secret_expires_at: null',
      '    logo_url: null',
      // the columns of later migrations, in table order (read from the catalog)
      '    initiate_login_uri: null',
      '    redirect_uris: []',
      '    post_logout_redirect_uris: []',
      '    public: false',
      '    backchannel_logout_uri: null',
      '    allow_groups: []',
      '    allow_roles: []',
      '    listed: true',
      '',
    ].join('\n'));
    expect(plan.stdout).not.toContain(hashClientSecret('billing-secret-2'));
    const json = JSON.parse((await seed(app, await files(edited), ['--plan', '--json'])).stdout);
    expect(json).toMatchObject({ applied: false, created: ['wiki'], updated: ['billing'], deleted: [] });
    expect(json.clients[0]).toStrictEqual({
      client_id: 'billing', change: 'changed',
      columns: { client_name: { from: 'Billing', to: 'Billing 2' }, secret_hash: 'changed', allowed_ips: { from: ['10.20.0.0/16', '192.0.2.10'], to: ['10.20.0.0/16'] } },
    });
    expect({ counts: await counts(), rows: await rows() }, 'nothing written, audited or announced').toStrictEqual(before);

    // refused: exit 2 with the message an apply gives (exit 1), and still nothing written
    const bad = seedSql([{ ...billing, ips: ['localhost'] }]);
    const refusedPlan = await seed(app, await files(bad), ['--plan']);
    const refusedApply = await seed(app, await files(bad));
    expect([refusedPlan.code, refusedApply.code]).toStrictEqual([2, 1]);
    const message = (s: string) => s.split('\n')[0];
    expect(message(refusedPlan.stderr)).toContain('"localhost"');
    expect(message(refusedPlan.stderr)).toBe(message(refusedApply.stderr));
    expect({ counts: await counts(), rows: await rows() }).toStrictEqual(before);

    // nor announced: the clients' change notification goes with the rollback
    const heard: string[] = [];
    let on!: () => void;
    const listening = new Promise<void>((resolve) => { on = resolve; });
    const listener = app.db.listen!('auth_client_changed', { notify: (p) => void heard.push(p), listening: (yes) => yes && on() });
    try {
      await listening;
      expect((await seed(app, await files(edited), ['--plan'])).code).toBe(0);
      await app.db.query("SELECT pg_notify('auth_client_changed', 'marker')");
      for (let i = 0; i < 200 && !heard.includes('marker'); i++) await new Promise((r) => setTimeout(r, 50));
      expect(heard).toStrictEqual(['marker']);
    } finally {
      await listener.close();
    }
  });

  it('--check exits 1 after a change in the admin API and for a client made by the CLI; 0 after re-applying (and --prune)', async () => {
    const project = await files(seedSql([billing, wiki]));
    expect((await seed(app, project)).code).toBe(0);
    const clean = await seed(app, project, ['--check']);
    expect([clean.code, clean.stdout]).toStrictEqual([0, 'The database matches seeds/clients.sql: 2 clients, 0 webhooks.\n']);

    const a = await signedIn(app);
    expect((await app.http.patch('/api/admin/clients/wiki', { client_name: 'Edited in the panel' }, a.as)).status).toBe(200);
    const drift = await seed(app, project, ['--check']);
    expect(drift.code).toBe(1);
    expect(drift.stdout).toBe('The database differs from seeds/clients.sql:\n  wiki: differs (database -> files)\n    client_name: "Edited in the panel" -> "Team wiki"\n');
    const json = JSON.parse((await seed(app, project, ['--check', '--json'])).stdout);
    expect(json).toStrictEqual({ files: ['seeds/clients.sql'], matches: false, clients: [{ client_id: 'wiki', change: 'changed', columns: { client_name: { from: 'Edited in the panel', to: 'Team wiki' } } }], webhooks: [] });
    expect((await seed(app, project)).code).toBe(0);
    expect((await seed(app, project, ['--check'])).code).toBe(0);

    // made by the CLI: not in the files; kept by an apply, deleted (audited) by --prune
    expect((await admin(app, ['client', 'create', '--name', 'Made by hand', '--callback-url', 'https://hand.example/cb', '--id', 'by-hand'])).code).toBe(0);
    const extra = await seed(app, project, ['--check']);
    expect([extra.code, extra.stdout]).toStrictEqual([1, 'The database differs from seeds/clients.sql:\n  by-hand: in the database, not in the files\n']);
    expect((await seed(app, project)).stdout).toContain('not in the files, kept: by-hand');
    const pruned = await seed(app, project, ['--prune', '--json']);
    expect(JSON.parse(pruned.stdout).deleted).toStrictEqual(['by-hand']);
    const audit = await app.db.query<{ details: any }>("SELECT details FROM audit_log WHERE action = 'client.delete' AND client_id = 'by-hand'");
    expect(audit.rows.map((r) => (typeof r.details === 'string' ? JSON.parse(r.details) : r.details))).toMatchObject([{ via: 'seed', prune: true }]);
    expect((await seed(app, project, ['--check'])).code).toBe(0);

    // deleted in the database: the files' client is missing
    await app.db.query("DELETE FROM clients WHERE client_id = 'billing'");
    const missing = await seed(app, project, ['--check']);
    expect([missing.code, missing.stdout]).toStrictEqual([1, 'The database differs from seeds/clients.sql:\n  billing: in the files, not in the database\n']);
    expect((await seed(app, project)).code).toBe(0);
  });

  it('client export, applied to a fresh database, recreates the same clients; applied again (or to the same one) changes nothing', async () => {
    await app.db.query("UPDATE clients SET logo_url = '/assets/wiki.png', previous_secret_hash = $1, previous_secret_expires_at = now() + interval '1 day' WHERE client_id = 'wiki'",
      [hashClientSecret('wiki-secret-0')]);
    const exported = await admin(app, ['client', 'export']);
    expect(exported.code, exported.stderr).toBe(0);
    expect(exported.stdout).toContain(hashClientSecret('billing-secret-1'));
    expect(exported.stdout).not.toContain('billing-secret-1\'');
    const project = await files(exported.stdout);
    const json = JSON.parse((await admin(app, ['client', 'export', '--json'])).stdout);
    expect(json.seed).toBe(exported.stdout.trimEnd() + '\n');
    expect(json.clients.map((c: { client_id: string }) => c.client_id)).toStrictEqual(['billing', 'wiki']);

    const auditBefore = (await counts()).audit;
    const same = await seed(app, project, ['--json']);
    expect(JSON.parse(same.stdout)).toMatchObject({ created: [], updated: [], deleted: [], unchanged: 2 });
    expect((await counts()).audit, 'no audit entry').toBe(auditBefore);

    const fresh = await startTestApp();
    try {
      const first = await seed(fresh, project, ['--json']);
      expect(first.code, first.stderr).toBe(0);
      expect(JSON.parse(first.stdout).created).toStrictEqual(['billing', 'wiki']);
      const strip = (r: Array<Record<string, unknown>>) => r.map(({ updated_at: _u, ...rest }) => rest);
      expect(strip(await rows(fresh))).toStrictEqual(strip(await rows()));
      const audit = (await counts(fresh)).audit;
      const again = await seed(fresh, project, ['--json']);
      expect(JSON.parse(again.stdout)).toMatchObject({ created: [], updated: [], unchanged: 2 });
      expect((await counts(fresh)).audit, 'the second apply is a no-op').toBe(audit);
      expect((await seed(fresh, project, ['--check'])).code).toBe(0);
    } finally {
      await fresh.close();
    }
  });

  it('a webhook seeded with its secret from the environment receives signed deliveries; plan, check and export cover it', async () => {
    const receiver = await startReceiver();
    try {
      const hook = `INSERT INTO seed_webhooks (url, events, active, secret_env) VALUES ('${receiver.url}', ARRAY['client.registered'], true, 'HOOK_SECRET');`;
      const env = { HOOK_SECRET: 'a-seeded-secret-of-the-env' };
      const project = await projectWith({ 'seeds/clients.sql': seedSql([billing, wiki]), 'seeds/hooks.sql': hook });
      const unset = await seed(app, project);
      expect(unset.code).toBe(1);
      expect(unset.stderr).toContain('the environment variable HOOK_SECRET, which holds its signing secret, is not set');
      const badEvent = await seed(app, await projectWith({ 'h.sql': hook.replace('client.registered', 'client.exploded') }), ['h.sql'], env);
      expect(badEvent.stderr).toContain('seed_webhooks_events_valid');
      const short = await seed(app, project, [], { HOOK_SECRET: 'short' });
      expect(short.stderr).toContain('its secret (HOOK_SECRET) must be at least 16 characters');

      const plan = await seed(app, project, ['--plan'], env);
      expect(plan.stdout).toContain(`  ${receiver.url}: webhook created\n    events: ["client.registered"]\n    active: true\n    secret: set\n`);
      expect((await counts()).webhooks).toBe(0);
      const applied = await seed(app, project, [], env);
      expect(applied.code, applied.stderr).toBe(0);
      const created = await app.db.query<{ details: any }>("SELECT details FROM audit_log WHERE action = 'webhook.create'");
      expect(created.rows.map((r) => (typeof r.details === 'string' ? JSON.parse(r.details) : r.details))).toMatchObject([{ via: 'seed', file: 'seeds/hooks.sql', url: receiver.url, events: ['client.registered'] }]);
      expect((await seed(app, project, ['--check'], env)).code).toBe(0);
      const rotated = await seed(app, project, ['--check'], { HOOK_SECRET: 'another-secret-of-the-env' });
      expect([rotated.code, rotated.stdout]).toStrictEqual([1, `The database differs from seeds/clients.sql, seeds/hooks.sql:\n  ${receiver.url}: webhook differs (database -> files)\n    secret: changed\n`]);

      // a client seeded next is announced to it, signed with the secret from the environment
      const more = await projectWith({ 'seeds/clients.sql': seedSql([billing, wiki, { ...wiki, id: 'newcomer', name: 'Newcomer' }]), 'seeds/hooks.sql': hook });
      expect((await seed(app, more, [], env)).code).toBe(0);
      await receiver.waitFor(() => receiver.of('client.registered').length > 0, 30_000);
      const envelope = verifyWebhook(receiver.of('client.registered')[0].raw, receiver.of('client.registered')[0].headers, env.HOOK_SECRET);
      expect(envelope.data).toMatchObject({ client_id: 'newcomer', client_name: 'Newcomer' });

      const exported = await admin(app, ['client', 'export']);
      expect(exported.stdout).toMatch(new RegExp(`INSERT INTO seed_webhooks \\(url, events, active, secret_env\\) VALUES\\n  \\('${receiver.url}', ARRAY\\['client.registered'\\]::text\\[\\], true, 'WEBHOOK_\\d+_SECRET'\\);`));
      expect(exported.stdout).not.toContain(env.HOOK_SECRET);

      // turned off by the files: planned as such, then closed as the panel's Disable closes it
      const off = await projectWith({ 'seeds/clients.sql': seedSql([billing, wiki, { ...wiki, id: 'newcomer', name: 'Newcomer' }]), 'seeds/hooks.sql': hook.replace('true', 'false') });
      expect((await seed(app, off, ['--plan'], env)).stdout).toContain(`  ${receiver.url}: webhook changed\n    active: true -> false\n`);
      expect((await seed(app, off, [], env)).code).toBe(0);
      expect((await app.db.query<{ active: boolean }>('SELECT active FROM webhooks WHERE url = $1', [receiver.url])).rows).toStrictEqual([{ active: false }]);

      // a webhook not in the files: reported by a check, kept by an apply, deleted (audited) by --prune
      const other = await app.services.webhooks.register({ url: 'http://127.0.0.1:9/other', events: ['user.login'], secret: 'another-webhook-secret' }, { via: 'cli' });
      const drift = await seed(app, off, ['--check'], env);
      expect([drift.code, drift.stdout]).toStrictEqual([1, `The database differs from seeds/clients.sql, seeds/hooks.sql:\n  http://127.0.0.1:9/other: webhook in the database, not in the files\n`]);
      expect((await seed(app, off, ['--prune'], env)).code).toBe(0);
      const deleted = await app.db.query<{ details: any }>("SELECT details FROM audit_log WHERE action = 'webhook.delete'");
      expect(deleted.rows.map((r) => (typeof r.details === 'string' ? JSON.parse(r.details) : r.details))).toMatchObject([{ via: 'seed', prune: true, webhook_id: other.id }]);
      expect((await seed(app, off, ['--check'], env)).code).toBe(0);

      // in production the address guard holds, as at registration
      await expect(applySeeds(app.db, [{ name: 'h.sql', sql: hook }], {}, { env, webhookPolicy: { blockPrivate: true } }))
        .rejects.toThrow(`h.sql: webhook ${receiver.url}: The host 127.0.0.1 is a loopback address; webhooks may only reach public addresses`);
    } finally {
      await receiver.close();
    }
  });

  it('refuses a forged audit entry, or an auth.actor set by the file, and applies nothing', async () => {
    const before = { counts: await counts(), rows: await rows() };
    const forgeries = {
      'insert.sql': `${seedSql([{ ...billing, name: 'Forger' }])}\nINSERT INTO audit_log (action, outcome, client_id, ip_address, details) VALUES ('client.delete', 'success', 'wiki', '203.0.113.9', '{"via": "seed", "file": "insert.sql"}');`,
      'block.sql': `DO $$ BEGIN INSERT INTO audit_log (action, outcome, user_id, details) VALUES ('client.update', 'success', 1, '{"via": "admin_api", "actor": "alice"}'); END $$;`,
      'actor.sql': `SELECT set_config('auth.actor', '{"via": "admin_api", "actor": "alice", "ip_address": "203.0.113.9"}', true);\n${seedSql([{ ...billing, name: 'Misattributed' }])}`,
      'trigger.sql': `CREATE TEMP TABLE t (x int);
CREATE FUNCTION pg_temp.forge() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN INSERT INTO audit_log (action, outcome, client_id, details) VALUES ('client.delete', 'success', 'wiki', '{"via": "seed"}'); RETURN NULL; END $f$;
CREATE TRIGGER forge AFTER INSERT ON pg_temp.t FOR EACH ROW EXECUTE FUNCTION pg_temp.forge();
INSERT INTO pg_temp.t VALUES (1);`,
    };
    const expected: Record<string, string> = {
      'insert.sql': 'a seed file may not write audit entries (here client.delete of client wiki)',
      'block.sql': 'a seed file may not write audit entries (here client.update of client none)',
      'actor.sql': 'a seed file may not set auth.actor',
      'trigger.sql': 'it created, changed or dropped a trigger',
    };
    for (const [name, sql] of Object.entries(forgeries)) {
      const run = await seed(app, await projectWith({ [name]: sql }), [name]);
      expect([run.code, run.stderr], name).toStrictEqual([1, expect.stringContaining(`${name}: `)]);
      expect(run.stderr, name).toContain(expected[name]);
      expect(run.stderr, name).toContain('Nothing was applied.');
      const planned = await seed(app, await projectWith({ [name]: sql }), [name, '--plan']);
      expect(planned.code, name).toBe(2);
    }
    expect({ counts: await counts(), rows: await rows() }, 'nothing applied, nothing audited').toStrictEqual(before);
    // the run's own entries still name the run
    const ok = await seed(app, await files(seedSql([{ ...billing, name: 'Billing, seeded' }])), []);
    expect(ok.code, ok.stderr).toBe(0);
    const entry = await app.db.query<{ details: any; ip_address: string | null }>("SELECT details, ip_address FROM audit_log WHERE action = 'client.update' AND client_id = 'billing' ORDER BY id DESC LIMIT 1");
    const details = typeof entry.rows[0].details === 'string' ? JSON.parse(entry.rows[0].details) : entry.rows[0].details;
    expect([details.via, details.file, entry.rows[0].ip_address]).toStrictEqual(['seed', 'seeds/clients.sql', null]);
  });
});
