import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashClientSecret } from '../../src/clients/credentials.ts';
import { applySeeds } from '../../src/seeds/apply.ts';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { admin } from '../helpers/cli.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { deliveries, subscribe } from '../auth/support.ts';
import { auditOf } from '../admin/support.ts';
import { ROOT } from '../helpers/processes.ts';
import { projectWith, seed, type SeedClient, seedSql } from './support.ts';

/** `npm run seed` against the running service: its effect is seen by the next request. */
describe('client systems as SQL seeds', () => {
  let app: TestApp;
  let username: string;
  beforeAll(async () => {
    app = await startTestApp();
    username = (await makeUser(app)).username;
  });
  afterAll(() => app?.close());

  const newClient = (over: Partial<SeedClient> = {}): SeedClient => ({
    id: unique('seeded-').toLowerCase().replace(/[^a-z0-9_-]/g, '-'),
    name: 'Seeded system',
    callback: 'https://seeded.example/sso/callback',
    ips: ['127.0.0.2'],
    secret: unique('seed-secret-'),
    ...over,
  });
  const apply = async (files: Record<string, string>, args = Object.keys(files)) => seed(app, await projectWith(files), args);
  const token = (c: SeedClient, localAddress: string, secret = c.secret) =>
    app.http.post('/api/sso/token', { client_id: c.id, client_secret: secret, username }, { localAddress });
  const listed = async (id: string) => {
    const r = await admin(app, ['client', 'list', '--json']);
    return (JSON.parse(r.stdout) as Array<Record<string, unknown>>).find((c) => c.client_id === id);
  };

  it('a seeded client issues tokens from an allowed address and gets 403 from any other', async () => {
    const c = newClient({ ips: ['127.0.0.2', '10.0.0.0/8'] });
    const run = await apply({ 'clients.sql': seedSql([c]) });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(`created 1 (${c.id})`);

    const allowed = await token(c, '127.0.0.2');
    expect(allowed.status).toBe(200);
    expect(allowed.body.redirect_url).toMatch(/^https:\/\/seeded\.example\/sso\/callback\?token=/);
    const other = await token(c, '127.0.0.3');
    expect(other.status).toBe(403);
    expect(other.body.error).toBe('ip_not_allowed');
    expect((await token(c, '127.0.0.2', 'wrong')).status).toBe(401);
  });

  it('an edited and re-applied seed changes name, secret, callback and addresses on the running service at once', async () => {
    const c = newClient();
    expect((await apply({ 'clients.sql': seedSql([c]) })).code).toBe(0);
    expect((await token(c, '127.0.0.2')).status).toBe(200);

    const edited: SeedClient = { ...c, name: 'Renamed by seed', secret: unique('rotated-'), callback: 'https://moved.example/cb', ips: ['127.0.0.3'] };
    const run = await apply({ 'clients.sql': seedSql([edited]) });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(`updated 1 (${c.id})`);

    expect((await token(c, '127.0.0.3')).status, 'the old secret fails at once').toBe(401);
    expect((await token(edited, '127.0.0.2')).status, 'the old address is refused at once').toBe(403);
    const ok = await token(edited, '127.0.0.3');
    expect(ok.status).toBe(200);
    expect(ok.body.redirect_url).toMatch(/^https:\/\/moved\.example\/cb\?token=/);
    expect(await listed(c.id)).toMatchObject({ client_name: 'Renamed by seed', callback_url: 'https://moved.example/cb', allowed_ips: ['127.0.0.3'] });

    // a second instance on the same database sees the same at once (nothing is cached)
    const second = await startTestApp({}, { db: app.db, databaseUrl: app.databaseUrl });
    try {
      const r = await second.http.post('/api/sso/token', { client_id: c.id, client_secret: edited.secret, username }, { localAddress: '127.0.0.3' });
      expect(r.status).toBe(200);
      // and an edit in plain SQL (psql) is seen by the next request of both
      await app.db.query(`UPDATE clients SET allowed_ips = '{127.0.0.4}' WHERE client_id = $1`, [c.id]);
      expect((await second.http.post('/api/sso/token', { client_id: c.id, client_secret: edited.secret, username }, { localAddress: '127.0.0.3' })).status).toBe(403);
      expect((await token(edited, '127.0.0.4')).status).toBe(200);
    } finally {
      await second.close();
    }
  });

  it('a file with one bad row applies nothing, and the message names the file and the value', async () => {
    const good = newClient();
    const fine = newClient();
    const bad = newClient({ ips: ['127.0.0.2', '10.0.0.0/33'] });
    const before = (await app.db.query('SELECT count(*)::int AS n FROM audit_log')).rows[0];
    const run = await apply({ 'a-good.sql': seedSql([good]), 'b-bad.sql': seedSql([fine, bad]) });
    expect(run.code).not.toBe(0);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('b-bad.sql');
    expect(run.stderr).toContain('"10.0.0.0/33"');
    expect(run.stderr).toContain(bad.id);
    expect(run.stderr).toContain('Nothing was applied');
    const present = await app.db.query('SELECT client_id FROM clients WHERE client_id = ANY ($1::text[])', [[good.id, fine.id, bad.id]]);
    expect(present.rows, 'not even the first file, nor the good row of the second').toStrictEqual([]);
    expect((await app.db.query('SELECT count(*)::int AS n FROM audit_log')).rows[0], 'no audit entry either').toStrictEqual(before);
  });

  it('the database refuses localhost, /33, javascript: and relative callbacks, and other bad values, whoever writes them', async () => {
    const existing = newClient();
    expect((await apply({ 'base.sql': seedSql([existing]) })).code).toBe(0);
    const cases: Array<[string, Partial<SeedClient>, string]> = [
      ['localhost', { ips: ['localhost'] }, '"localhost"'],
      ['a /33 range', { ips: ['10.0.0.0/33'] }, '"10.0.0.0/33"'],
      ['a padded entry', { ips: [' 127.0.0.1'] }, '" 127.0.0.1"'],
      ['a zero-padded address', { ips: ['010.0.0.1'] }, '"010.0.0.1"'],
      ['a short address', { ips: ['127.1'] }, '"127.1"'],
      ['a javascript: callback', { callback: 'javascript:alert(1)' }, '"javascript:alert(1)"'],
      ['a relative callback', { callback: '/sso/callback' }, '"/sso/callback"'],
      ['a callback with credentials', { callback: 'https://user:pw@evil.example/cb' }, 'https://user:pw@evil.example/cb'],
      ['a callback with a fragment', { callback: 'https://x.example/cb#frag' }, 'https://x.example/cb#frag'],
      ['a callback with a space', { callback: 'https://x.example/a b' }, 'https://x.example/a b'],
    ];
    for (const [label, over, named] of cases) {
      const run = await apply({ 'bad.sql': seedSql([{ ...existing, ...over }]) });
      expect(run.code, `${label} is refused by the seed`).toBe(1);
      expect(run.stderr, `${label}: the message names the value`).toContain(named);
      const fresh = newClient(over);
      await expect(app.db.query(seedSql([fresh])), `${label} is refused in plain SQL`).rejects.toThrow();
    }
    await expect(app.db.query(`UPDATE clients SET secret_hash = 'not-a-hash' WHERE client_id = $1`, [existing.id])).rejects.toThrow(/secret_hash/);
    await expect(app.db.query(`INSERT INTO clients (client_id, client_name, callback_url, secret_hash) VALUES ('Bad Id', 'x', 'https://x.example/', repeat('a', 64))`)).rejects.toThrow(/client_id/);
    await expect(app.db.query(`UPDATE clients SET allowed_ips = NULL WHERE client_id = $1`, [existing.id])).rejects.toThrow(/allowed_ips/);
    expect(await listed(existing.id), 'the row is as it was').toMatchObject({ allowed_ips: existing.ips, callback_url: existing.callback });
  });

  it('three applies of one file give one client.registered and one audit entry; a change is audited as an update', async () => {
    const hook = await subscribe(app, ['client.registered']);
    const c = newClient();
    const project = await projectWith({ 'seeds/clients.sql': seedSql([c]) });
    for (let i = 0; i < 3; i++) expect((await seed(app, project)).code).toBe(0);
    const sent = (await deliveries(app, hook, 'client.registered')).filter((d) => d.client_id === c.id);
    expect(sent).toStrictEqual([{ client_id: c.id, client_name: c.name }]);
    const created = (await auditOf(app, 'client.create')).filter((r) => r.client_id === c.id);
    expect(created).toHaveLength(1);
    expect(created[0].details).toMatchObject({ via: 'seed', file: 'seeds/clients.sql' });
    expect((await auditOf(app, 'client.update')).filter((r) => r.client_id === c.id), 'an unchanged re-apply is no update').toStrictEqual([]);
    const stamp = async () => (await app.db.query<{ t: string }>('SELECT updated_at::text AS t FROM clients WHERE client_id = $1', [c.id])).rows[0].t;
    const first = await stamp();
    expect((await seed(app, project)).stdout).toContain('unchanged');
    expect(await stamp(), 'applying the same file again changes nothing').toBe(first);

    const changed = await projectWith({ 'seeds/clients.sql': seedSql([{ ...c, name: 'Changed', ips: ['10.1.0.0/16'] }]) });
    expect((await seed(app, changed)).code).toBe(0);
    const updates = (await auditOf(app, 'client.update')).filter((r) => r.client_id === c.id);
    expect(updates).toHaveLength(1);
    expect(updates[0].details).toMatchObject({ via: 'seed', changed: { client_name: 'Changed', allowed_ips: ['10.1.0.0/16'] } });
    expect((await deliveries(app, hook, 'client.registered')).filter((d) => d.client_id === c.id), 'still one event').toHaveLength(1);
  });

  it('counts as unchanged only the clients the files name, not every other client in the table', async () => {
    await makeClient(app); // in the table, in no file
    const c = newClient();
    const file = { name: 'seeds/clients.sql', sql: seedSql([c]) };
    expect(await applySeeds(app.db, [file])).toMatchObject({ created: [c.id], updated: [], deleted: [], unchanged: 0 });
    expect(await applySeeds(app.db, [file])).toMatchObject({ created: [], updated: [], deleted: [], unchanged: 1 });
    const other = newClient();
    const both = { name: 'seeds/clients.sql', sql: seedSql([c, other]) };
    expect(await applySeeds(app.db, [both])).toMatchObject({ created: [other.id], updated: [], unchanged: 1 });
    const project = await projectWith({ 'seeds/clients.sql': seedSql([c, other]) });
    const run = await seed(app, project);
    expect(run.stdout).toMatch(/created 0, updated 0, deleted 0, unchanged 2\b/);
  });

  it('of runs at once applying the same new client, one reports it created and the others unchanged', async () => {
    const c = newClient();
    const file = { name: 'seeds/clients.sql', sql: seedSql([c]) };
    const results = await Promise.all(Array.from({ length: 4 }, () => applySeeds(app.db, [file])));
    expect(results.map((r) => r.created.includes(c.id)).filter(Boolean), JSON.stringify(results)).toHaveLength(1);
    expect(results.filter((r) => !r.created.includes(c.id)).map((r) => [r.updated.includes(c.id), r.unchanged > 0])).toStrictEqual(Array(3).fill([false, true]));
    expect((await auditOf(app, 'client.create')).filter((r) => r.client_id === c.id), 'and the database created it once').toHaveLength(1);
  });

  it('reports a change of the logo or of the previous secret as an update, as the audit log does', async () => {
    const c = newClient();
    expect((await apply({ 'seeds/clients.sql': seedSql([c]) })).code).toBe(0);
    const logo = await apply({ 'seeds/logo.sql': `UPDATE clients SET logo_url = '/assets/favicon.svg' WHERE client_id = '${c.id}';` });
    expect(logo.code, logo.stderr).toBe(0);
    expect(logo.stdout).toContain(`updated 1 (${c.id})`);
    expect((await auditOf(app, 'client.update')).filter((r) => r.client_id === c.id)).toHaveLength(1);
    const grace = await apply({ 'seeds/grace.sql': `UPDATE clients SET previous_secret_hash = repeat('a', 64), previous_secret_expires_at = now() + interval '1 hour' WHERE client_id = '${c.id}';` });
    expect(grace.code, grace.stderr).toBe(0);
    expect(grace.stdout).toContain(`updated 1 (${c.id})`);
  });

  it('refuses the shipped example file as it is (no example secret ever works), and applies it once real hashes are put in', async () => {
    const example = await readFile(path.join(ROOT, 'seeds/example.sql.sample'), 'utf8');
    const readme = await readFile(path.join(ROOT, 'docs/clients-as-code.md'), 'utf8');
    const insert = example.slice(example.indexOf('INSERT INTO clients'));
    expect(readme, 'docs/clients-as-code.md shows the example file').toContain(insert.trim());
    const asShipped = await apply({ 'seeds/clients.sql': example });
    expect(asShipped.code).not.toBe(0);
    expect(asShipped.stderr).toMatch(/secret_hash/);
    const [billing, wiki] = [unique('billing-'), unique('wiki-')];
    const filled = example.replaceAll('<the secret_hash printed by: npm run -s admin -- client new-secret>', hashClientSecret(unique('own-secret-')))
      .replaceAll("'billing'", `'${billing}'`).replaceAll("'wiki'", `'${wiki}'`);
    const applied = await apply({ 'seeds/clients.sql': filled });
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain(`created 2 (${billing}, ${wiki})`);
  });

  it('with no argument applies every seeds/*.sql in name order and skips the example file', async () => {
    const c = newClient({ name: 'First' });
    const project = await projectWith({
      'seeds/10-create.sql': seedSql([c]),
      'seeds/20-rename.sql': seedSql([{ ...c, name: 'Second' }]),
      'seeds/example.sql.sample': "INSERT INTO clients (client_id) VALUES ('never applied');",
    });
    const run = await seed(app, project, ['--json']);
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ files: ['seeds/10-create.sql', 'seeds/20-rename.sql'], created: [c.id] });
    expect(await listed(c.id)).toMatchObject({ client_name: 'Second' });
  });

  it('keeps the textual form of allowed_ips: addresses bare, ranges with host bits cleared, mapped IPv6 as IPv4, duplicates once', async () => {
    const c = newClient({ ips: ['127.0.0.1', '10.9.8.7/8', '::ffff:192.0.2.1', '2001:DB8::1', '127.0.0.1', '192.0.2.0/24'] });
    expect((await apply({ 'ips.sql': seedSql([c]) })).code).toBe(0);
    expect((await listed(c.id))?.allowed_ips).toStrictEqual(['127.0.0.1', '10.0.0.0/8', '192.0.2.1', '2001:db8::1', '192.0.2.0/24']);
  });

  it('refuses a seed file that ends or nests the transaction itself, and accepts a DO block', async () => {
    const c = newClient();
    const run = await apply({ 'tx.sql': `BEGIN;\n${seedSql([c])}COMMIT;\n` });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('tx.sql');
    expect(run.stderr).toContain('BEGIN');
    expect(await listed(c.id)).toBeUndefined();
    const block = await apply({ 'do.sql': `DO $$ BEGIN PERFORM 1; END $$;\n${seedSql([c])}` });
    expect(block.code, block.stderr).toBe(0);
  });

  const SCS_OFF = 'SET standard_conforming_strings = off;\n';
  it('applies nothing when a COMMIT follows an escape string (E\'it\\\'s\')', async () => {
    const first = newClient();
    const run = await apply({
      '01.sql': seedSql([first]),
      '02.sql': `SELECT E'it\\'s'; COMMIT; SELECT 'x';\n${seedSql([newClient({ ips: ['not-an-ip'] })])}`,
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/02\.sql: "COMMIT"/);
    expect(run.stderr).toContain('Nothing was applied.');
    expect(await listed(first.id), 'the first file is not committed').toBeUndefined();
  });

  it('refuses a COMMIT the scan cannot see, and applies nothing', async () => {
    const first = newClient();
    // with standard_conforming_strings off (set by an earlier file) a plain string takes \' too,
    // which the scan of one file cannot know
    const run = await apply({ '01.sql': `${SCS_OFF}${seedSql([first])}`, '02.sql': `SELECT 'it\\'s'; COMMIT; SELECT 'x';\n${seedSql([newClient()])}` });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/02\.sql: COMMIT inside a seed file/);
    expect(run.stderr).toContain('Nothing was applied.');
    expect(await listed(first.id), 'the first file is not committed').toBeUndefined();
  });

  it('stops at a ROLLBACK the scan cannot see and does not claim that nothing was applied', async () => {
    const [first, tail, third] = [newClient(), newClient(), newClient()];
    const hidden = `SELECT 'it\\'s'; ROLLBACK; SELECT 'x';\n${seedSql([tail])}`;
    const run = await apply({ '01.sql': `${SCS_OFF}${seedSql([first])}`, '02.sql': hidden, '03.sql': seedSql([third]) });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/02\.sql: the file ended the run's transaction/);
    expect(run.stderr).not.toContain('Nothing was applied');
    expect(await listed(first.id), 'undone by the ROLLBACK').toBeUndefined();
    expect(await listed(third.id), 'the run stopped at the file').toBeUndefined();
    expect(await listed(tail.id), 'what followed the ROLLBACK committed on its own, as the message warns').toBeDefined();
  });

  it('a seed that deletes a client reports and audits the removal', async () => {
    const c = newClient();
    expect((await apply({ 'add.sql': seedSql([c]) })).code).toBe(0);
    const run = await apply({ 'remove.sql': `DELETE FROM clients WHERE client_id = '${c.id}';` }, ['remove.sql', '--json']);
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ deleted: [c.id], created: [], updated: [] });
    const rows = (await auditOf(app, 'client.delete')).filter((r) => r.client_id === c.id);
    expect(rows.map((r) => r.details)).toMatchObject([{ via: 'seed', file: 'remove.sql' }]);
    expect((await token(c, '127.0.0.2')).status).toBe(401);
  });

  it('names a missing file and applies nothing', async () => {
    const c = newClient();
    const run = await apply({ 'ok.sql': seedSql([c]) }, ['ok.sql', 'missing.sql']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('missing.sql: no such file');
    expect(await listed(c.id)).toBeUndefined();
  });
});
