import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

  beforeAll(async () => {
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
  afterAll(() => stop());

  it('creates a client whose secret works at once, and lists it masked', async () => {
    const created = await runCli(['client', 'create', '--name', 'Shop', '--callback-url', 'https://shop.example/cb', '--allow-ip', '127.0.0.1', '--allow-ip', '10.0.0.0/8', '--json'], env);
    expect(created.code, created.stderr).toBe(0);
    const client = JSON.parse(created.stdout);
    expect(Object.keys(client).sort()).toStrictEqual(['allowed_ips', 'callback_url', 'client_id', 'client_name', 'client_secret']);
    expect(client.allowed_ips).toStrictEqual(['127.0.0.1', '10.0.0.0/8']);
    expect(client.client_secret).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const user = await runCli(['user', 'create', '--username', unique('Bob'), '--email', 'bob@example.com', '--password', 'a long password', '--json'], env);
    expect(user.code, user.stderr).toBe(0);
    const { username } = JSON.parse(user.stdout);
    const http = httpClient(baseUrl);
    const issued = await http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username });
    expect(issued.status, issued.text).toBe(200);

    const listed = await runCli(['client', 'list', '--json'], env);
    expect(listed.code, listed.stderr).toBe(0);
    const row = JSON.parse(listed.stdout).find((c: { client_id: string }) => c.client_id === client.client_id);
    expect(row.client_secret).toBe(`••••••••${client.client_secret.slice(-4)}`);
    expect(listed.stdout.includes(client.client_secret)).toBe(false);
  });

  it('rotates a secret: the old one gets 401, the new one works', async () => {
    const created = JSON.parse((await runCli(['client', 'create', '--name', 'Rotating', '--callback-url', 'https://r.example/cb', '--allow-ip', '127.0.0.1', '--json'], env)).stdout);
    const username = JSON.parse((await runCli(['user', 'create', '--username', unique('carol'), '--email', 'c@example.com', '--password', 'a long password', '--json'], env)).stdout).username;
    const rotated = await runCli(['client', 'rotate-secret', created.client_id, '--json'], env);
    expect(rotated.code, rotated.stderr).toBe(0);
    const { client_secret: fresh } = JSON.parse(rotated.stdout);
    expect(fresh).not.toBe(created.client_secret);
    const http = httpClient(baseUrl);
    const old = await http.post('/api/sso/token', { client_id: created.client_id, client_secret: created.client_secret, username });
    expect(old.status).toBe(401);
    const now = await http.post('/api/sso/token', { client_id: created.client_id, client_secret: fresh, username });
    expect(now.status).toBe(200);
  });

  it('refuses a malformed allow-list entry with a message naming it and a non-zero exit', async () => {
    const created = JSON.parse((await runCli(['client', 'create', '--name', 'Ips', '--callback-url', 'https://i.example/cb', '--json'], env)).stdout);
    const bad = await runCli(['client', 'set-ips', created.client_id, '10.0.0.1', '300.1.1.1', '--json'], env);
    expect(bad.code).not.toBe(0);
    expect(bad.stdout).toBe('');
    expect(bad.stderr).toMatch(/300\.1\.1\.1/);
    const good = await runCli(['client', 'set-ips', created.client_id, '10.0.0.1', '2001:db8::/32', '--json'], env);
    expect(good.code, good.stderr).toBe(0);
    expect(JSON.parse(good.stdout)).toStrictEqual({ client_id: created.client_id, allowed_ips: ['10.0.0.1', '2001:db8::/32'] });
  });

  it('deactivates, reactivates and unlocks users', async () => {
    const username = JSON.parse((await runCli(['user', 'create', '--username', unique('dave'), '--email', 'd@example.com', '--password', 'a long password', '--json'], env)).stdout).username;
    const off = await runCli(['user', 'set-active', username, 'false', '--json'], env);
    expect(JSON.parse(off.stdout)).toStrictEqual({ username, active: false });
    const on = await runCli(['user', 'set-active', username, 'true', '--json'], env);
    expect(JSON.parse(on.stdout)).toStrictEqual({ username, active: true });
    const unlocked = await runCli(['user', 'unlock', username, '--json'], env);
    expect(JSON.parse(unlocked.stdout)).toStrictEqual({ username, locked: false });
    const missing = await runCli(['user', 'set-active', 'nobody-at-all', 'true', '--json'], env);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toMatch(/No user/);
  });
});

describe('admin command line without a running service', () => {
  it.skipIf(onPostgres && 'embedded only')('opens the embedded database directly, and the service then sees the data', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-cli-'));
    const env = { DATABASE_URL: '', DATA_DIR: dataDir, JWT_SECRET: TEST_ENV.JWT_SECRET, BCRYPT_COST: '4', NODE_ENV: 'test' };
    const created = await runCli(['client', 'create', '--name', 'Offline', '--callback-url', 'https://o.example/cb', '--allow-ip', '127.0.0.1', '--json'], env);
    expect(created.code, created.stderr).toBe(0);
    const user = await runCli(['user', 'create', '--username', 'erin', '--email', 'e@example.com', '--password', 'a long password', '--json'], env);
    expect(user.code, user.stderr).toBe(0);
    const { client_id, client_secret } = JSON.parse(created.stdout);
    const server = await startServerProcess(env);
    try {
      const issued = await httpClient(server.url).post('/api/sso/token', { client_id, client_secret, username: 'erin' });
      expect(issued.status, issued.text).toBe(200);
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
    expect(r.code).not.toBe(0);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/--name is required/);
  });
});

async function assertHashedOnly(app: TestApp, clientId: string, secret: string) {
  const row = (await app.db.query<Record<string, unknown>>('SELECT * FROM clients WHERE client_id = $1', [clientId])).rows[0];
  const stored = JSON.stringify(row);
  expect(stored.includes(secret), 'the plain secret is not stored').toBe(false);
  expect(String(row.secret_hash)).toMatch(/^[0-9a-f]{64}$/);
  expect(row.secret_last4).toBe(secret.slice(-4));
}

describe('admin demo command', () => {
  it('creates the demo client and user on request, and never in production', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-demo-'));
    const app = onPostgres ? await startTestApp() : undefined;
    try {
      const env = { DATABASE_URL: app?.databaseUrl ?? '', DATA_DIR: dataDir, JWT_SECRET: TEST_ENV.JWT_SECRET, BCRYPT_COST: '4', NODE_ENV: 'test' };
      const r = await runCli(['demo', '--base-url', 'http://127.0.0.1:4555', '--json'], env);
      expect(r.code, r.stderr).toBe(0);
      const demo = JSON.parse(r.stdout);
      expect(demo.client_id).toBe('demo');
      expect(demo.callback_url).toBe('http://127.0.0.1:4555/demo/callback');
      expect(typeof demo.password).toBe('string');
      const prod = await runCli(['demo', '--json'], { ...env, NODE_ENV: 'production', BCRYPT_COST: '10', SESSION_SECRET: TEST_ENV.SESSION_SECRET });
      expect(prod.code).not.toBe(0);
      expect(prod.stderr).toMatch(/never created in production/);
    } finally {
      await app?.close();
    }
  });
});
