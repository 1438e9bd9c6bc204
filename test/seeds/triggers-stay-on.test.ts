import { copyFile, mkdtemp, readdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateClientSecret, hashClientSecret } from '../../src/clients/credentials.ts';
import { migrate } from '../../src/db/migrate.ts';
import { findSchemaProblems } from '../../src/db/schema-check.ts';
import { triggerSwitch } from '../../src/seeds/apply.ts';
import { auditOf } from '../admin/support.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { makeUser } from '../helpers/factories.ts';
import { projectWith, seed } from './support.ts';

const MIGRATIONS = fileURLToPath(new URL('../../migrations/', import.meta.url));

const triggersOn = async (app: TestApp) => (await app.db.query<{ tgname: string; tgenabled: string }>(
  "SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'clients'::regclass AND NOT tgisinternal ORDER BY tgname")).rows;

const exists = async (app: TestApp, id: string) => (await app.db.query('SELECT 1 FROM clients WHERE client_id = $1', [id])).rowCount === 1;

/** A client row as a dump (pg_dump) writes it. */
const row = (id: string) => `INSERT INTO public.clients (client_id, client_name, callback_url, allowed_ips, active, secret_hash)
  VALUES ('${id}', 'Dumped', 'https://dumped.example/cb', '{127.0.0.1}', true, '${hashClientSecret(generateClientSecret())}');`;

describe('a seed file may not switch the clients table\'s triggers off', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());


  it('refuses a pg_dump --disable-triggers file before anything runs: no client without its client.create', async () => {
    const dump = `SELECT pg_catalog.set_config('search_path', '', false);
ALTER TABLE public.clients DISABLE TRIGGER ALL;
${row('dumped-notrig')}
ALTER TABLE public.clients ENABLE TRIGGER ALL;
`;
    const run = await seed(app, await projectWith({ 'dump.sql': dump }), ['dump.sql']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('dump.sql: "ALTER TABLE public.clients DISABLE TRIGGER ALL": the clients table\'s triggers check, audit and announce every change');
    expect(run.stderr).toContain('Nothing was applied');
    expect(await exists(app, 'dumped-notrig')).toBe(false);
    expect((await auditOf(app, 'client.create')).filter((a) => a.client_id === 'dumped-notrig')).toStrictEqual([]);
  });

  it('refuses session_replication_role, as a statement or through set_config', async () => {
    for (const [name, sql] of [
      ['set.sql', `SET session_replication_role = replica;\n${row('replica-a')}`],
      ['config.sql', `SELECT set_config('session_replication_role', 'replica', false);\n${row('replica-b')}\nSELECT set_config('session_replication_role', 'origin', false);`],
    ]) {
      const run = await seed(app, await projectWith({ [name]: sql }), [name]);
      expect([run.code, run.stderr], name).toStrictEqual([1, expect.stringContaining('session_replication_role')]);
    }
    expect(await exists(app, 'replica-a')).toBe(false);
    expect(await exists(app, 'replica-b')).toBe(false);
  });

  it('refuses, after the file, a trigger left off in a way the scan cannot read, and leaves every trigger on', async () => {
    const sneaky = `DO $$ BEGIN EXECUTE 'ALTER TABLE clients ' || 'DISABLE' || ' TRIGGER clients_after_write'; END $$;\n${row('sneaky')}`;
    expect(triggerSwitch(sneaky), 'not read by the scan').toBeNull();
    const run = await seed(app, await projectWith({ 'off.sql': sneaky }), ['off.sql']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('off.sql: trigger clients_after_write after the file');
    expect(await exists(app, 'sneaky')).toBe(false);
    expect((await triggersOn(app)).every((t) => t.tgenabled === 'O'), 'nothing of the run stays, the trigger\'s switch included').toBe(true);
    expect(await findSchemaProblems(app.db)).toStrictEqual([]);
  });

  it('reads the switch only in code: a comment or a string naming DISABLE TRIGGER is not refused', () => {
    expect(triggerSwitch("-- ALTER TABLE clients DISABLE TRIGGER ALL\nINSERT INTO t VALUES ('disable trigger');")).toBeNull();
  });
});

describe('the previous secret\'s hash, whoever writes it', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());

  it('refuses the secret itself in previous_secret_hash, without repeating it; takes a hash in capitals as the hash', async () => {
    const oldSecret = generateClientSecret();
    const insert = (id: string, previous: string) => `INSERT INTO clients (client_id, client_name, callback_url, allowed_ips, secret_hash, previous_secret_hash, previous_secret_expires_at)
VALUES ('${id}', 'Prev', 'https://prev.example/cb', '{127.0.0.1}', '${hashClientSecret(generateClientSecret())}', '${previous}', now() + interval '1 day');`;
    const run = await seed(app, await projectWith({ 'a.sql': insert('prevplain', oldSecret) }), ['a.sql']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('previous_secret_hash of client prevplain is not the hex SHA-256 of a secret');
    expect(run.stderr, 'the refusal does not print the secret').not.toContain(oldSecret);
    expect(await exists(app, 'prevplain')).toBe(false);

    const upper = hashClientSecret(oldSecret).toUpperCase();
    const ok = await seed(app, await projectWith({ 'b.sql': insert('prevupper', upper) }), ['b.sql']);
    expect(ok.code, ok.stderr).toBe(0);
    const stored = await app.db.query<{ previous_secret_hash: string }>("SELECT previous_secret_hash FROM clients WHERE client_id = 'prevupper'");
    expect(stored.rows[0].previous_secret_hash).toBe(hashClientSecret(oldSecret));

    // psql as well as a seed
    await expect(app.db.query("UPDATE clients SET previous_secret_hash = 'not a hash' WHERE client_id = 'prevupper'")).rejects.toThrow(/previous_secret_hash of client prevupper/);
  });
});

describe('a seed file changes the clients table and nothing else (found by a review helper)', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());

  const auditCount = async () => (await app.db.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_log')).rows[0].n;
  const hash = () => hashClientSecret(generateClientSecret());

  it('refuses the secret itself in secret_hash without repeating it (psql too)', async () => {
    const plain = `PlainClientSecret-${generateClientSecret()}`;
    const run = await seed(app, await projectWith({ 'a.sql': `INSERT INTO clients (client_id, client_name, callback_url, allowed_ips, secret_hash)
VALUES ('plainsecret', 'Plain', 'https://plain.example/cb', '{127.0.0.1}', '${plain}');` }), ['a.sql']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('secret_hash of client plainsecret is not the hex SHA-256 of a secret');
    expect(run.stderr.toLowerCase(), 'the refusal does not print the secret').not.toContain(plain.toLowerCase());
    expect(await exists(app, 'plainsecret')).toBe(false);
    const err = await app.db.query(`UPDATE clients SET secret_hash = '${plain}'`).then(() => null, (e: Error) => e);
    expect(String(err?.message).toLowerCase()).not.toContain(plain.toLowerCase());
  });

  it('refuses a file that changes another table (a user made administrator): nothing applied, nothing audited', async () => {
    const user = await makeUser(app);
    const before = await auditCount();
    const sql = `${row('withuser')}\nUPDATE users SET role = 'admin' WHERE id = ${user.id};`;
    const run = await seed(app, await projectWith({ 'a.sql': sql }), ['a.sql']);
    expect(run.code, run.stdout).toBe(1);
    expect(run.stderr).toContain('a.sql: a seed file may change only the clients table; it changed users (1 updated)');
    expect((await app.db.query<{ role: string }>('SELECT role FROM users WHERE id = $1', [user.id])).rows[0].role).toBe('user');
    expect(await exists(app, 'withuser')).toBe(false);
    expect(await auditCount()).toBe(before);
  });

  it('refuses the same done in a function or a DO block, which no scan of the text would read', async () => {
    const user = await makeUser(app);
    const sql = `DO $$ BEGIN EXECUTE 'UPDATE ' || 'users SET role = ''admin'' WHERE id = ${user.id}'; END $$;`;
    const run = await seed(app, await projectWith({ 'a.sql': sql }), ['a.sql']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('it changed users (1 updated)');
    expect((await app.db.query<{ role: string }>('SELECT role FROM users WHERE id = $1', [user.id])).rows[0].role).toBe('user');
  });

  it('refuses TRUNCATE, of another table or of clients itself (whose rows would go unaudited)', async () => {
    await seed(app, await projectWith({ 'a.sql': row('kept') }), ['a.sql']);
    for (const [statement, table] of [['TRUNCATE webhooks CASCADE;', 'webhooks'], ['TRUNCATE clients CASCADE;', 'clients']]) {
      const run = await seed(app, await projectWith({ 'b.sql': statement }), ['b.sql']);
      expect(run.code, statement).toBe(1);
      expect(run.stderr, statement).toContain(`it emptied or rewrote ${table}`);
    }
    expect(await exists(app, 'kept')).toBe(true);
  });

  it('still takes what the clients table brings with it: audit rows, client.registered deliveries, the tokens and links of a deleted client', async () => {
    const user = await makeUser(app);
    await app.services.webhooks.register({ url: 'http://127.0.0.1:9/hook', events: ['client.registered'], secret: 'a-webhook-secret-16' }, { via: 'cli' });
    const made = await seed(app, await projectWith({ 'a.sql': `INSERT INTO clients (client_id, client_name, callback_url, allowed_ips, secret_hash)
VALUES ('cascaded', 'Cascaded', 'https://c.example/cb', '{127.0.0.1}', '${hash()}');` }), ['a.sql']);
    expect(made.code, made.stderr).toBe(0);
    await app.db.query("INSERT INTO sso_tokens (jti, user_id, client_id, username, ip_address, issued_at, expires_at) VALUES (gen_random_uuid(), $1, 'cascaded', $2, '127.0.0.1', now(), now() + interval '1 minute')", [user.id, user.username]);
    await app.db.query("INSERT INTO user_client_links (user_id, client_id, external_username, username_key, status) VALUES ($1, 'cascaded', 'c-name', 'c-name', 'active')", [user.id]);
    const removed = await seed(app, await projectWith({ 'b.sql': "DELETE FROM clients WHERE client_id = 'cascaded';" }), ['b.sql']);
    expect(removed.code, removed.stderr).toBe(0);
    expect((await app.db.query("SELECT count(*)::int AS n FROM sso_tokens WHERE client_id = 'cascaded'")).rows[0].n).toBe(0);
  });

  it('refuses a forged event (a delivery the service would sign and send) or a forged audit entry (the diff\'s review helper)', async () => {
    const hook = await app.services.webhooks.register({ url: 'http://127.0.0.1:9/hook', events: ['user.login'], secret: 'a-webhook-secret-16' }, { via: 'cli' });
    const forged = `INSERT INTO webhook_deliveries (id, webhook_id, event, data) VALUES (gen_random_uuid(), ${hook.id}, 'user.login', '{"user_id": 1}');`;
    const b = await seed(app, await projectWith({ 'b.sql': `${row('withforged')}\n${forged}` }), ['b.sql']);
    expect(b.code).toBe(1);
    expect(b.stderr).toContain('it changed webhook_deliveries (1 inserted)');
    const c = await seed(app, await projectWith({ 'c.sql': "INSERT INTO audit_log (action, outcome, username, details) VALUES ('user.login', 'success', 'alibi', '{}');" }), ['c.sql']);
    expect(c.code).toBe(1);
    expect(c.stderr).toContain('c.sql: a seed file may not write audit entries (here user.login of client none)');
    expect((await app.db.query("SELECT count(*)::int AS n FROM audit_log WHERE username = 'alibi'")).rows[0].n).toBe(0);
  });

  it('refuses switching the row counts it reads off (track_counts), and any change of the schema\'s definitions', async () => {
    const user = await makeUser(app);
    const hidden = await seed(app, await projectWith({ 'a.sql': `SET LOCAL track_counts = off;\nUPDATE users SET role = 'admin' WHERE id = ${user.id};` }), ['a.sql']);
    expect(hidden.code).toBe(1);
    expect(hidden.stderr).toContain('track_counts');
    const viaConfig = await seed(app, await projectWith({ 'a.sql': `SELECT set_config('track_' || 'counts', 'off', true);\nUPDATE users SET role = 'admin' WHERE id = ${user.id};` }), ['a.sql']);
    expect(viaConfig.code, 'left off after the file').toBe(1);
    expect((await app.db.query<{ role: string }>('SELECT role FROM users WHERE id = $1', [user.id])).rows[0].role).toBe('user');
    for (const ddl of ["ALTER TABLE users ALTER COLUMN role SET DEFAULT 'admin';",
      'CREATE OR REPLACE FUNCTION clients_after_write() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN RETURN NULL; END $f$;']) {
      const run = await seed(app, await projectWith({ 'd.sql': `${row('ddlghost')}\n${ddl}` }), ['d.sql']);
      expect(run.code, ddl).toBe(1);
      expect(run.stderr, ddl).toContain('it changed definitions of the schema');
    }
    expect(await exists(app, 'ddlghost')).toBe(false);
  });

  it('refuses deleting a client\'s tokens or links by hand: they go only with their client', async () => {
    const user = await makeUser(app);
    expect((await seed(app, await projectWith({ 'a.sql': row('handdel') }), ['a.sql'])).code).toBe(0);
    await app.db.query("INSERT INTO user_client_links (user_id, client_id, external_username, username_key, status) VALUES ($1, 'handdel', 'h-name', 'h-name', 'active')", [user.id]);
    const run = await seed(app, await projectWith({ 'b.sql': "DELETE FROM user_client_links WHERE client_id = 'handdel';" }), ['b.sql']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('it changed user_client_links (1 deleted)');
    expect((await app.db.query("SELECT count(*)::int AS n FROM user_client_links WHERE client_id = 'handdel'")).rows[0].n).toBe(1);
  });

  it('refuses deleting another client\'s links in a file that deletes a client: only the deleted client\'s go (a review helper)', async () => {
    const user = await makeUser(app);
    expect((await seed(app, await projectWith({ 'a.sql': `${row('keeper')}\n${row('leaving')}` }), ['a.sql'])).code).toBe(0);
    await app.db.query(`INSERT INTO user_client_links (user_id, client_id, external_username, username_key, status)
      VALUES ($1, 'keeper', 'k-name', 'k-name', 'active'), ($1, 'leaving', 'l-name', 'l-name', 'active')`, [user.id]);
    const file = `DELETE FROM clients WHERE client_id = 'leaving';\nDELETE FROM user_client_links WHERE client_id = 'keeper';`;
    const run = await seed(app, await projectWith({ 'b.sql': file }), ['b.sql']);
    expect(run.code, run.stdout + run.stderr).toBe(1);
    expect(run.stderr).toContain('it changed user_client_links (1 deleted)');
    const links = await app.db.query<{ client_id: string }>("SELECT client_id FROM user_client_links WHERE client_id IN ('keeper', 'leaving') ORDER BY client_id");
    expect(links.rows.map((r) => r.client_id), 'the file was undone as a whole').toStrictEqual(['keeper', 'leaving']);
    // the same file without the other client's links goes through, the leaving client's link with it
    const alone = await seed(app, await projectWith({ 'c.sql': "DELETE FROM clients WHERE client_id = 'leaving';" }), ['c.sql']);
    expect(alone.code, alone.stderr).toBe(0);
    expect((await app.db.query("SELECT count(*)::int AS n FROM user_client_links WHERE client_id = 'leaving'")).rows[0].n).toBe(0);
  });
});

describe('migration 0018_client_previous_secret_check', () => {
  it('clears (audited) a previous secret stored as anything but its hash, and lower-cases a hash in capitals', async () => {
    const t = await createTestDatabase();
    const dir = await mkdtemp(path.join(os.tmpdir(), 'auth-prev-mig-'));
    try {
      const files = (await readdir(MIGRATIONS)).filter((f) => f.endsWith('.sql')).sort();
      for (const f of files.filter((f) => f < '0018')) await copyFile(path.join(MIGRATIONS, f), path.join(dir, f));
      await migrate(t.db, dir);
      const hash = hashClientSecret('kept');
      await t.db.query(`INSERT INTO clients (client_id, client_name, callback_url, allowed_ips, secret_hash, previous_secret_hash, previous_secret_expires_at) VALUES
        ('plain', 'Plain', 'https://a.example/cb', '{}', $1, 'the-old-secret-itself', now() + interval '1 day'),
        ('upper', 'Upper', 'https://b.example/cb', '{}', $1, $2, now() + interval '1 day'),
        ('fine', 'Fine', 'https://c.example/cb', '{}', $1, $3, now() + interval '1 day')`, [hash, hash.toUpperCase(), hash]);
      for (const f of files.filter((f) => f >= '0018')) await copyFile(path.join(MIGRATIONS, f), path.join(dir, f));
      await migrate(t.db, dir);
      const rows = (await t.db.query<{ client_id: string; previous_secret_hash: string | null; kept: boolean }>(
        'SELECT client_id, previous_secret_hash, previous_secret_expires_at IS NOT NULL AS kept FROM clients ORDER BY client_id')).rows;
      expect(rows).toStrictEqual([
        { client_id: 'fine', previous_secret_hash: hash, kept: true },
        { client_id: 'plain', previous_secret_hash: null, kept: false },
        { client_id: 'upper', previous_secret_hash: hash, kept: true },
      ]);
      const audit = (await t.db.query<{ client_id: string; details: any }>("SELECT client_id, details FROM audit_log WHERE action = 'client.update' ORDER BY id")).rows
        .map((r) => ({ client_id: r.client_id, details: typeof r.details === 'string' ? JSON.parse(r.details) : r.details }));
      expect(audit.map((a) => [a.client_id, a.details.via, a.details.changed?.previous_secret])).toContainEqual(['plain', 'migration', 'cleared']);
      expect(JSON.stringify(audit)).not.toContain('the-old-secret-itself');
    } finally {
      await t.drop();
    }
  });
});

describe('a seed in production', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());

  const PRODUCTION = { NODE_ENV: 'production', BCRYPT_COST: '10' };
  const upsert = (id: string, callback: string, name = 'Shop') => `INSERT INTO clients (client_id, client_name, callback_url, allowed_ips, secret_hash)
VALUES ('${id}', '${name}', '${callback}', '{127.0.0.1}', '${hashClientSecret('s')}')
ON CONFLICT (client_id) DO UPDATE SET client_name = EXCLUDED.client_name, callback_url = EXCLUDED.callback_url;`;

  it('refuses a plain-http callback it sets, as the API does (the token travels in its query string), but not on loopback', async () => {
    const refused = await seed(app, await projectWith({ 'a.sql': upsert('plainhttp', 'http://shop.example/cb') }), ['a.sql'], PRODUCTION);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('callback_url of client plainhttp: callback_url must use https');
    expect(await exists(app, 'plainhttp')).toBe(false);
    const loopback = await seed(app, await projectWith({ 'b.sql': upsert('loopback', 'http://127.0.0.1:8080/cb') }), ['b.sql'], PRODUCTION);
    expect(loopback.code, loopback.stderr).toBe(0);
    const development = await seed(app, await projectWith({ 'c.sql': upsert('devhttp', 'http://shop.example/cb') }), ['c.sql']);
    expect(development.code, 'outside production http is fine').toBe(0);
  });

  it('leaves alone a callback written before: renaming such a client is not refused', async () => {
    expect((await seed(app, await projectWith({ 'd.sql': upsert('earlierhttp', 'http://shop.example/cb') }), ['d.sql'])).code).toBe(0);
    const renamed = await seed(app, await projectWith({ 'e.sql': upsert('earlierhttp', 'http://shop.example/cb', 'Shop renamed') }), ['e.sql'], PRODUCTION);
    expect(renamed.code, renamed.stderr).toBe(0);
  });
});
