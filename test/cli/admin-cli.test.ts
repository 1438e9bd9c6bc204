import assert from 'node:assert/strict';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startTestApp, TEST_ENV, type TestApp, unique } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { makeUser } from '../helpers/factories.ts';
import { client as httpClient } from '../helpers/http.ts';
import { runCli, startServerProcess } from '../helpers/processes.ts';

/**
 * The command line against a running service: on PostgreSQL through DATABASE_URL, on the
 * embedded database through the service's socket in DATA_DIR.
 */
describe('admin command line with the service running', () => {
  let env: Record<string, string | undefined>;
  let baseUrl: string;
  let stop: () => Promise<unknown>;
  let app: TestApp | undefined;

  before(async () => {
    if (onPostgres) {
      app = await startTestApp();
      env = { DATABASE_URL: app.databaseUrl, JWT_SECRET: TEST_ENV.JWT_SECRET, BCRYPT_COST: '4' };
      baseUrl = app.url;
      stop = () => app!.close();
    } else {
      const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-cli-'));
      env = { DATABASE_URL: '', DATA_DIR: dataDir, JWT_SECRET: TEST_ENV.JWT_SECRET, BCRYPT_COST: '4', NODE_ENV: 'test' };
      const server = await startServerProcess(env);
      baseUrl = server.url;
      stop = server.stop;
    }
  });
  after(() => stop());

  it('creates a client whose secret works at once, and lists it masked', async () => {
    const created = await runCli(['client', 'create', '--name', 'Shop', '--callback-url', 'https://shop.example/cb', '--allow-ip', '127.0.0.1', '--allow-ip', '10.0.0.0/8', '--json'], env);
    assert.equal(created.code, 0, created.stderr);
    const client = JSON.parse(created.stdout);
    assert.deepEqual(Object.keys(client).sort(), ['allowed_ips', 'callback_url', 'client_id', 'client_name', 'client_secret']);
    assert.deepEqual(client.allowed_ips, ['127.0.0.1', '10.0.0.0/8']);
    assert.match(client.client_secret, /^[A-Za-z0-9_-]{43}$/);

    const user = await runCli(['user', 'create', '--username', unique('Bob'), '--email', 'bob@example.com', '--password', 'a long password', '--json'], env);
    assert.equal(user.code, 0, user.stderr);
    const { username } = JSON.parse(user.stdout);
    const http = httpClient(baseUrl);
    const issued = await http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username });
    assert.equal(issued.status, 200, issued.text);

    const listed = await runCli(['client', 'list', '--json'], env);
    assert.equal(listed.code, 0, listed.stderr);
    const row = JSON.parse(listed.stdout).find((c: { client_id: string }) => c.client_id === client.client_id);
    assert.equal(row.client_secret, `••••••••${client.client_secret.slice(-4)}`);
    assert.equal(listed.stdout.includes(client.client_secret), false);
  });

  it('rotates a secret: the old one gets 401, the new one works', async () => {
    const created = JSON.parse((await runCli(['client', 'create', '--name', 'Rotating', '--callback-url', 'https://r.example/cb', '--allow-ip', '127.0.0.1', '--json'], env)).stdout);
    const username = JSON.parse((await runCli(['user', 'create', '--username', unique('carol'), '--email', 'c@example.com', '--password', 'a long password', '--json'], env)).stdout).username;
    const rotated = await runCli(['client', 'rotate-secret', created.client_id, '--json'], env);
    assert.equal(rotated.code, 0, rotated.stderr);
    const { client_secret: fresh } = JSON.parse(rotated.stdout);
    assert.notEqual(fresh, created.client_secret);
    const http = httpClient(baseUrl);
    const old = await http.post('/api/sso/token', { client_id: created.client_id, client_secret: created.client_secret, username });
    assert.equal(old.status, 401);
    const now = await http.post('/api/sso/token', { client_id: created.client_id, client_secret: fresh, username });
    assert.equal(now.status, 200);
  });

  it('refuses a malformed allow-list entry with a message naming it and a non-zero exit', async () => {
    const created = JSON.parse((await runCli(['client', 'create', '--name', 'Ips', '--callback-url', 'https://i.example/cb', '--json'], env)).stdout);
    const bad = await runCli(['client', 'set-ips', created.client_id, '10.0.0.1', '300.1.1.1', '--json'], env);
    assert.notEqual(bad.code, 0);
    assert.equal(bad.stdout, '');
    assert.match(bad.stderr, /300\.1\.1\.1/);
    const good = await runCli(['client', 'set-ips', created.client_id, '10.0.0.1', '2001:db8::/32', '--json'], env);
    assert.equal(good.code, 0, good.stderr);
    assert.deepEqual(JSON.parse(good.stdout), { client_id: created.client_id, allowed_ips: ['10.0.0.1', '2001:db8::/32'] });
  });

  it('deactivates, reactivates and unlocks users', async () => {
    const username = JSON.parse((await runCli(['user', 'create', '--username', unique('dave'), '--email', 'd@example.com', '--password', 'a long password', '--json'], env)).stdout).username;
    const off = await runCli(['user', 'set-active', username, 'false', '--json'], env);
    assert.deepEqual(JSON.parse(off.stdout), { username, active: false });
    const on = await runCli(['user', 'set-active', username, 'true', '--json'], env);
    assert.deepEqual(JSON.parse(on.stdout), { username, active: true });
    const unlocked = await runCli(['user', 'unlock', username, '--json'], env);
    assert.deepEqual(JSON.parse(unlocked.stdout), { username, locked: false });
    const missing = await runCli(['user', 'set-active', 'nobody-at-all', 'true', '--json'], env);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /No user/);
  });
});

describe('admin command line without a running service', () => {
  it('opens the embedded database directly, and the service then sees the data', { skip: onPostgres && 'embedded only' }, async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-cli-'));
    const env = { DATABASE_URL: '', DATA_DIR: dataDir, JWT_SECRET: TEST_ENV.JWT_SECRET, BCRYPT_COST: '4', NODE_ENV: 'test' };
    const created = await runCli(['client', 'create', '--name', 'Offline', '--callback-url', 'https://o.example/cb', '--allow-ip', '127.0.0.1', '--json'], env);
    assert.equal(created.code, 0, created.stderr);
    const user = await runCli(['user', 'create', '--username', 'erin', '--email', 'e@example.com', '--password', 'a long password', '--json'], env);
    assert.equal(user.code, 0, user.stderr);
    const { client_id, client_secret } = JSON.parse(created.stdout);
    const server = await startServerProcess(env);
    try {
      const issued = await httpClient(server.url).post('/api/sso/token', { client_id, client_secret, username: 'erin' });
      assert.equal(issued.status, 200, issued.text);
    } finally {
      await server.stop();
    }
  });

  it('stores the secret only as a hash', async () => {
    const app = await startTestApp();
    try {
      const env = onPostgres ? { DATABASE_URL: app.databaseUrl } : undefined;
      if (!env) {
        // Embedded: exercise the same service code in-process (the child cannot share an in-memory database).
        const { secret, client } = await app.services.clients.createClient({ name: 'Hash', callbackUrl: 'https://h.example/cb' }, { via: 'cli' });
        await assertHashedOnly(app, client.client_id, secret);
        return;
      }
      const created = JSON.parse((await runCli(['client', 'create', '--name', 'Hash', '--callback-url', 'https://h.example/cb', '--json'], { ...env, JWT_SECRET: TEST_ENV.JWT_SECRET })).stdout);
      await assertHashedOnly(app, created.client_id, created.client_secret);
    } finally {
      await app.close();
    }
  });

  it('answers usage errors on stderr with a non-zero exit', async () => {
    const r = await runCli(['client', 'create', '--json'], { DATABASE_URL: '', DATA_DIR: await mkdtemp(path.join(os.tmpdir(), 'auth-cli-')) });
    assert.notEqual(r.code, 0);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /--name is required/);
  });
});

async function assertHashedOnly(app: TestApp, clientId: string, secret: string) {
  const row = (await app.db.query<Record<string, unknown>>('SELECT * FROM clients WHERE client_id = $1', [clientId])).rows[0];
  const stored = JSON.stringify(row);
  assert.equal(stored.includes(secret), false, 'the plain secret is not stored');
  assert.match(String(row.secret_hash), /^[0-9a-f]{64}$/);
  assert.equal(row.secret_last4, secret.slice(-4));
}

describe('admin demo command', () => {
  it('creates the demo client and user on request, and never in production', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-demo-'));
    const app = onPostgres ? await startTestApp() : undefined;
    try {
      const env = { DATABASE_URL: app?.databaseUrl ?? '', DATA_DIR: dataDir, JWT_SECRET: TEST_ENV.JWT_SECRET, BCRYPT_COST: '4', NODE_ENV: 'test' };
      const r = await runCli(['demo', '--base-url', 'http://127.0.0.1:4555', '--json'], env);
      assert.equal(r.code, 0, r.stderr);
      const demo = JSON.parse(r.stdout);
      assert.equal(demo.client_id, 'demo');
      assert.equal(demo.callback_url, 'http://127.0.0.1:4555/demo/callback');
      assert.equal(typeof demo.password, 'string');
      const prod = await runCli(['demo', '--json'], { ...env, NODE_ENV: 'production', SESSION_SECRET: TEST_ENV.SESSION_SECRET });
      assert.notEqual(prod.code, 0);
      assert.match(prod.stderr, /never created in production/);
    } finally {
      await app?.close();
    }
  });
});
