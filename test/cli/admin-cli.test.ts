import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAdmin } from '../../src/cli/run.ts';
import { loadConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/open.ts';
import { createInstance } from '../../src/service.ts';
import { startTestApp, TEST_ENV, type TestApp, unique } from '../helpers/app.ts';
import { admin, captured } from '../helpers/cli.ts';
import { createTestDatabase, onPostgres } from '../helpers/db.ts';
import { client as httpClient } from '../helpers/http.ts';
import { runCli, startServerProcess } from '../helpers/processes.ts';

/** The admin commands, run in-process on the database of a running service (both databases). */
describe('admin command line with the service running', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  it('creates a client whose secret works at once, and lists it masked', async () => {
    const created = await admin(app, ['client', 'create', '--name', 'Shop', '--callback-url', 'https://shop.example/cb', '--allow-ip', '127.0.0.1', '--allow-ip', '10.0.0.0/8', '--json']);
    expect(created.code, created.stderr).toBe(0);
    const client = JSON.parse(created.stdout);
    expect(Object.keys(client).sort()).toStrictEqual(['allow_groups', 'allow_roles', 'allowed_ips', 'backchannel_logout_uri', 'callback_url', 'client_id', 'client_name', 'client_secret', 'listed', 'post_logout_redirect_uris', 'public', 'redirect_uris']);
    expect(client.allowed_ips).toStrictEqual(['127.0.0.1', '10.0.0.0/8']);
    expect(client.client_secret).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const user = await admin(app, ['user', 'create', '--username', unique('Bob'), '--email', 'bob@example.com', '--password', 'a long password', '--json']);
    expect(user.code, user.stderr).toBe(0);
    const { username } = JSON.parse(user.stdout);
    const issued = await app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username });
    expect(issued.status, issued.text).toBe(200);

    const listed = await admin(app, ['client', 'list', '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    const row = JSON.parse(listed.stdout).find((c: { client_id: string }) => c.client_id === client.client_id);
    expect(row.client_secret).toBe(`••••••••${client.client_secret.slice(-4)}`);
    expect(listed.stdout.includes(client.client_secret)).toBe(false);
  });

  it('rotates a secret: the old one gets 401, the new one works', async () => {
    const created = JSON.parse((await admin(app, ['client', 'create', '--name', 'Rotating', '--callback-url', 'https://r.example/cb', '--allow-ip', '127.0.0.1', '--json'])).stdout);
    const username = JSON.parse((await admin(app, ['user', 'create', '--username', unique('carol'), '--email', 'c@example.com', '--password', 'a long password', '--json'])).stdout).username;
    const rotated = await admin(app, ['client', 'rotate-secret', created.client_id, '--json']);
    expect(rotated.code, rotated.stderr).toBe(0);
    const { client_secret: fresh } = JSON.parse(rotated.stdout);
    expect(fresh).not.toBe(created.client_secret);
    const old = await app.http.post('/api/sso/token', { client_id: created.client_id, client_secret: created.client_secret, username });
    expect(old.status).toBe(401);
    const now = await app.http.post('/api/sso/token', { client_id: created.client_id, client_secret: fresh, username });
    expect(now.status).toBe(200);
  });

  it('refuses a malformed allow-list entry with a message naming it and a non-zero exit', async () => {
    const created = JSON.parse((await admin(app, ['client', 'create', '--name', 'Ips', '--callback-url', 'https://i.example/cb', '--json'])).stdout);
    const bad = await admin(app, ['client', 'set-ips', created.client_id, '10.0.0.1', '300.1.1.1', '--json']);
    expect(bad.code).not.toBe(0);
    expect(bad.stdout).toBe('');
    expect(bad.stderr).toMatch(/300\.1\.1\.1/);
    const good = await admin(app, ['client', 'set-ips', created.client_id, '10.0.0.1', '2001:db8::/32', '--json']);
    expect(good.code, good.stderr).toBe(0);
    expect(JSON.parse(good.stdout)).toStrictEqual({ client_id: created.client_id, allowed_ips: ['10.0.0.1', '2001:db8::/32'] });
  });

  it('empties an allow list only when told so with --none, never for a forgotten address', async () => {
    const created = JSON.parse((await admin(app, ['client', 'create', '--name', 'Kept', '--callback-url', 'https://k.example/cb', '--allow-ip', '10.0.0.1', '--json'])).stdout);
    const allowed = async () => (await app.db.query<{ allowed_ips: string[] }>('SELECT allowed_ips FROM clients WHERE client_id = $1', [created.client_id])).rows[0].allowed_ips;
    const forgotten = await admin(app, ['client', 'set-ips', created.client_id, '--json']);
    expect(forgotten.code, 'a usage error').toBe(2);
    expect(forgotten.stdout).toBe('');
    expect(forgotten.stderr).toMatch(/--none/);
    expect(await allowed(), 'the list is kept').toStrictEqual(['10.0.0.1']);
    const both = await admin(app, ['client', 'set-ips', created.client_id, '10.0.0.2', '--none']);
    expect(both.code).toBe(2);
    expect(await allowed()).toStrictEqual(['10.0.0.1']);
    const none = await admin(app, ['client', 'set-ips', created.client_id, '--none', '--json']);
    expect(none.code, none.stderr).toBe(0);
    expect(JSON.parse(none.stdout)).toStrictEqual({ client_id: created.client_id, allowed_ips: [] });
    expect(await allowed()).toStrictEqual([]);
  });

  it('deactivates, reactivates and unlocks users', async () => {
    const { username, id } = JSON.parse((await admin(app, ['user', 'create', '--username', unique('dave'), '--email', 'd@example.com', '--password', 'a long password', '--json'])).stdout);
    const off = await admin(app, ['user', 'set-active', username, 'false', '--json']);
    expect(JSON.parse(off.stdout)).toStrictEqual({ username, active: false });
    const on = await admin(app, ['user', 'set-active', username, 'true', '--json']);
    expect(JSON.parse(on.stdout)).toStrictEqual({ username, active: true });
    expect((await admin(app, ['user', 'unlock', username])).stdout, 'nothing to unlock').toBe(`${username} was not locked\n`);
    expect((await app.http.post('/api/auth/login', { login: username, password: 'a wrong password' })).status).toBe(401);
    const unlocked = await admin(app, ['user', 'unlock', username, '--json']);
    expect(JSON.parse(unlocked.stdout)).toStrictEqual({ username, locked: false, user_exists: true });
    const [entry] = (await app.db.query<{ user_id: number | null }>("SELECT user_id FROM audit_log WHERE action = 'user.unlock' AND username = $1", [username])).rows;
    expect(entry.user_id, 'the entry is found by the user').toBe(id);
    const nobody = await admin(app, ['user', 'unlock', 'nobody-by-this-name']);
    expect(nobody.code).toBe(0);
    expect(nobody.stdout).toMatch(/No user is named nobody-by-this-name/);
    const badRole = await admin(app, ['user', 'create', '--username', unique('eve'), '--email', 'e@example.com', '--password', 'a long password', '--role', 'Admin ']);
    expect(badRole.code).not.toBe(0);
    expect(badRole.stderr).toMatch(/role/);
    const missing = await admin(app, ['user', 'set-active', 'nobody-at-all', 'true', '--json']);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toMatch(/No user/);
  });

  it('link list says on stderr when it lists only the first 1000 links, and how to narrow the list', async () => {
    const client = JSON.parse((await admin(app, ['client', 'create', '--name', 'Many links', '--callback-url', 'https://m.example/cb', '--json'])).stdout);
    const prefix = unique('many').toLowerCase();
    await app.db.query(
      `INSERT INTO users (username, email, role, full_name, password_hash, active)
       SELECT $1 || n, $1 || n || '@example.com', 'user', '', 'x', true FROM generate_series(1, 1001) AS n`, [prefix]);
    await app.db.query(
      `INSERT INTO user_client_links (user_id, client_id, external_username, username_key, status)
       SELECT id, $2, username, username, 'pending' FROM users WHERE username LIKE $1 || '%'`, [prefix, client.client_id]);
    const all = await admin(app, ['link', 'list', '--client', client.client_id, '--json']);
    expect(all.code, all.stderr).toBe(0);
    expect(JSON.parse(all.stdout)).toHaveLength(1000);
    expect(all.stderr).toMatch(/only the first 1000 links .*--status or --client/);
    await app.db.query('DELETE FROM user_client_links WHERE client_id = $1 AND external_username = $2', [client.client_id, `${prefix}1001`]);
    const fits = await admin(app, ['link', 'list', '--client', client.client_id, '--json']);
    expect(JSON.parse(fits.stdout)).toHaveLength(1000);
    expect(fits.stderr).not.toMatch(/only the first/);
  });

  it('stores the secret only as a hash', async () => {
    const created = JSON.parse((await admin(app, ['client', 'create', '--name', 'Hash', '--callback-url', 'https://h.example/cb', '--json'])).stdout);
    const row = (await app.db.query<Record<string, unknown>>('SELECT * FROM clients WHERE client_id = $1', [created.client_id])).rows[0];
    expect(JSON.stringify(row).includes(created.client_secret), 'the plain secret is not stored').toBe(false);
    expect(String(row.secret_hash)).toMatch(/^[0-9a-f]{64}$/);
    expect(row.secret_last4).toBe(created.client_secret.slice(-4));
  });

  it('answers usage errors on stderr with a non-zero exit', async () => {
    const r = await admin(app, ['client', 'create', '--json']);
    expect(r.code).not.toBe(0);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/--name is required/);
    const unknownOption = await admin(app, ['client', 'list', '--no-such-option']);
    expect(unknownOption.code).not.toBe(0);
    expect(unknownOption.stderr).toMatch(/no-such-option/);
  });

  it('exits 2 for every usage error, those the option parser finds too (as npm run seed does)', async () => {
    const client = JSON.parse((await admin(app, ['client', 'create', '--name', 'Usage', '--callback-url', 'https://u.example/cb', '--json'])).stdout);
    for (const argv of [['client', 'create'], ['client', 'list', '--no-such-option'], ['client', 'rotate-secret', client.client_id, '--grace-seconds', '-5'],
      ['client', 'rotate-secret', client.client_id, '--grace-seconds'], ['client', 'rotate-secret', client.client_id, '--grace-seconds', 'soon'], ['user', 'unlock']]) {
      const r = await admin(app, argv);
      expect(r.code, `${argv.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stdout).toBe('');
    }
    await app.services.clients.authenticateClient(client.client_id, client.client_secret); // nothing was rotated
  });

  it('creates the demo client and user on request, and never in production', async () => {
    const r = await admin(app, ['demo', '--base-url', 'http://127.0.0.1:4555', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const demo = JSON.parse(r.stdout);
    expect(demo.client_id).toBe('demo');
    expect(demo.callback_url).toBe('http://127.0.0.1:4555/demo/callback');
    expect(typeof demo.password).toBe('string');
    const prod = await admin(app, ['demo', '--json'], { NODE_ENV: 'production', BCRYPT_COST: '10', SESSION_SECRET: TEST_ENV.SESSION_SECRET });
    expect(prod.code).not.toBe(0);
    expect(prod.stderr).toMatch(/never created in production/);
  });
});

describe('admin command line without a running service', () => {
  it('refuses a read-only command on an unmigrated database and leaves it untouched; a writing command migrates it', async () => {
    const fresh = await createTestDatabase(); // empty: the wrong database, or one never migrated
    try {
      const run = (args: string[]) => captured(runAdmin, args, { env: { ...TEST_ENV }, db: fresh.db });
      const tables = async () => (await fresh.db.query<{ name: string }>(
        "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public'")).rows.map((r) => r.name);
      for (const command of [['client', 'list'], ['link', 'list', '--json'], ['prune', '--dry-run']]) {
        const r = await run(command);
        expect(r.code, `${command.join(' ')}: ${r.stderr}`).toBe(1);
        expect(r.stderr).toMatch(/migrations \(from 0001_\w+\.sql\) are not applied to this database.*npm run migrate/);
        expect(r.stdout).toBe('');
      }
      expect(await tables(), 'nothing was created').toStrictEqual([]);

      const created = await run(['client', 'create', '--name', 'Migrating', '--callback-url', 'https://m.example/cb', '--json']);
      expect(created.code, created.stderr).toBe(0);
      expect(await tables()).toContain('schema_migrations');
      const listed = await run(['client', 'list', '--json']);
      expect(listed.code, listed.stderr).toBe(0);
      expect(JSON.parse(listed.stdout).map((c: { client_id: string }) => c.client_id)).toContain(JSON.parse(created.stdout).client_id);
    } finally {
      await fresh.drop();
    }
  });

  it.skipIf(onPostgres)('opens the embedded database directly, and the service then sees the data', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-cli-'));
    const env = { ...TEST_ENV, DATABASE_URL: '', DATA_DIR: dataDir };
    const run = async (args: string[]) => {
      let stdout = '';
      let stderr = '';
      const code = await runAdmin(args, { stdout: (t) => void (stdout += t), stderr: (t) => void (stderr += t), env });
      return { code, stdout, stderr };
    };
    const created = await run(['client', 'create', '--name', 'Offline', '--callback-url', 'https://o.example/cb', '--allow-ip', '127.0.0.1', '--json']);
    expect(created.code, created.stderr).toBe(0);
    const user = await run(['user', 'create', '--username', 'erin', '--email', 'e@example.com', '--password', 'a long password', '--json']);
    expect(user.code, user.stderr).toBe(0);
    const { client_id, client_secret } = JSON.parse(created.stdout);

    // The service opens the same data directory afterwards (the command line let go of it).
    const config = loadConfig(env);
    const db = await openDatabase(config, { serve: false });
    const instance = await createInstance(config, db, pino({ level: 'silent' }));
    try {
      const issued = await httpClient(instance.app).post('/api/sso/token', { client_id, client_secret, username: 'erin' });
      expect(issued.status, issued.text).toBe(200);
    } finally {
      await instance.stop();
      await db.close();
    }
  });
});

/**
 * The real command line as a process: its own start-up, configuration from the environment,
 * and stdout carrying exactly one JSON document. On the embedded database it reaches the
 * running service's database through the socket in DATA_DIR; on PostgreSQL, DATABASE_URL.
 */
describe('admin command line as a process (smoke test)', () => {
  it('creates a client through the real entry point; the running service honours it at once', async () => {
    let env: Record<string, string | undefined>;
    let baseUrl: string;
    let stop: () => Promise<unknown>;
    if (onPostgres) {
      const app = await startTestApp();
      env = { DATABASE_URL: app.databaseUrl, JWT_SECRET: TEST_ENV.JWT_SECRET, BCRYPT_COST: '4', NODE_ENV: 'test' };
      baseUrl = await app.listen();
      stop = () => app.close();
    } else {
      const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-cli-'));
      env = { DATABASE_URL: '', DATA_DIR: dataDir, JWT_SECRET: TEST_ENV.JWT_SECRET, BCRYPT_COST: '4', NODE_ENV: 'test' };
      const server = await startServerProcess(env);
      baseUrl = server.url;
      stop = server.stop;
    }
    try {
      const created = await runCli(['client', 'create', '--name', 'Smoke', '--callback-url', 'https://s.example/cb', '--allow-ip', '127.0.0.1', '--json'], env);
      expect(created.code, created.stderr).toBe(0);
      const client = JSON.parse(created.stdout); // the whole of stdout is one JSON document
      const user = await runCli(['user', 'create', '--username', 'smoke', '--email', 's@example.com', '--password', 'a long password', '--json'], env);
      expect(user.code, user.stderr).toBe(0);
      const issued = await httpClient(baseUrl).post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username: 'smoke' });
      expect(issued.status, issued.text).toBe(200);
    } finally {
      await stop();
    }
  });
});
