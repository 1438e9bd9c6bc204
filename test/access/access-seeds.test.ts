import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashClientSecret } from '../../src/clients/credentials.ts';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { admin } from '../helpers/cli.ts';
import { makeUser } from '../helpers/factories.ts';
import { projectWith, seed } from '../seeds/support.ts';

const quote = (s: string) => `'${s.replace(/'/g, "''")}'`;

/** A seed file with one client and its access rule, as docs/access.md shows it. */
function ruleSeed(c: { id: string; secret: string; groups: string[]; roles?: string[]; listed?: boolean }): string {
  return `INSERT INTO clients (client_id, client_name, callback_url, allowed_ips, secret_hash, allow_groups, allow_roles, listed) VALUES
  (${quote(c.id)}, 'Billing', 'https://billing.example/sso/callback', ARRAY['127.0.0.1', '::1'], ${quote(hashClientSecret(c.secret))},
   ARRAY[${c.groups.map(quote).join(', ')}]::text[], ARRAY[${(c.roles ?? []).map(quote).join(', ')}]::text[], ${c.listed ?? true})
ON CONFLICT (client_id) DO UPDATE SET
  client_name = EXCLUDED.client_name, callback_url = EXCLUDED.callback_url, allowed_ips = EXCLUDED.allowed_ips,
  secret_hash = EXCLUDED.secret_hash, allow_groups = EXCLUDED.allow_groups, allow_roles = EXCLUDED.allow_roles, listed = EXCLUDED.listed;
`;
}

/** The access rule as configuration: seed files write it, the database checks it. */
describe('access rules in seed files', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());

  const apply = async (files: Record<string, string>) => seed(app, await projectWith(files), Object.keys(files));
  const issue = (id: string, secret: string, username: string) => app.http.post('/api/sso/token', { client_id: id, client_secret: secret, username });

  it('applies a rule naming existing groups, and the running service holds it at once', async () => {
    const group = unique('finance-');
    expect((await admin(app, ['group', 'create', group])).code).toBe(0);
    const member = await makeUser(app);
    const outsider = await makeUser(app);
    expect((await admin(app, ['user', 'add-to-group', member.username, group])).code).toBe(0);
    const c = { id: unique('billing-'), secret: unique('secret-'), groups: [group] };
    const run = await apply({ 'billing.sql': ruleSeed(c) });
    expect(run.code, run.stderr).toBe(0);
    expect((await issue(c.id, c.secret, member.username)).status).toBe(200);
    expect((await issue(c.id, c.secret, outsider.username)).body.error).toBe('access_denied');
    // re-applied with the rule cleared: open to all, reported and audited as a change
    const again = await apply({ 'billing.sql': ruleSeed({ ...c, groups: [] }) });
    expect(again.stdout, again.stderr).toContain(`updated 1 (${c.id})`);
    expect((await issue(c.id, c.secret, outsider.username)).status).toBe(200);
    const audit = await app.db.query<{ details: { via: string; changed: unknown } }>(
      "SELECT details FROM audit_log WHERE action = 'client.update' AND client_id = $1 ORDER BY id", [c.id]);
    // the rule a new client starts with is named beside its client.create, then each change
    expect(audit.rows.map((r) => [r.details.via, r.details.changed])).toStrictEqual([['seed', { allow_groups: [group] }], ['seed', { allow_groups: [] }]]);
  });

  it('refuses a seed naming a group that does not exist, naming it, and applies nothing of the run', async () => {
    const first = { id: unique('ok-'), secret: unique('secret-'), groups: [] };
    const bad = { id: unique('billing-'), secret: unique('secret-'), groups: ['nonexistent-team'] };
    const run = await apply({ 'a.sql': ruleSeed(first), 'b.sql': ruleSeed(bad) });
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain('b.sql');
    expect(run.stderr).toMatch(/names group "nonexistent-team", which does not exist/);
    const rows = await app.db.query('SELECT client_id FROM clients WHERE client_id = ANY ($1::text[])', [[first.id, bad.id]]);
    expect(rows.rowCount, 'nothing of the run was applied').toBe(0);
  });

  it('refuses a role that is no role, and keeps entries once and sorted', async () => {
    const c = { id: unique('roles-'), secret: unique('secret-'), groups: [], roles: ['Admin '] };
    const run = await apply({ 'r.sql': ruleSeed(c) });
    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(/allow_roles entry "Admin " of client/);
    const ok = await apply({ 'r.sql': ruleSeed({ ...c, roles: ['support', 'admin', 'support'], listed: false }) });
    expect(ok.code, ok.stderr).toBe(0);
    const row = await app.db.query<{ allow_roles: string[]; listed: boolean }>('SELECT allow_roles, listed FROM clients WHERE client_id = $1', [c.id]);
    expect(row.rows[0]).toStrictEqual({ allow_roles: ['admin', 'support'], listed: false });
  });
});
