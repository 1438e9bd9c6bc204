import { createHash } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';

type Client = Awaited<ReturnType<typeof makeClient>>;

/**
 * Client records are kept in each instance's memory for the credential checks, and must be
 * dropped the moment a client changes, however it was changed.
 */
describe('client records kept in memory', () => {
  let app: TestApp;
  let user: Awaited<ReturnType<typeof makeUser>>;
  /** Plain SQL on a connection of its own (PostgreSQL), or on the one embedded database. */
  let sql: (text: string, values?: unknown[]) => Promise<unknown>;
  let other: pg.Client | undefined;

  beforeAll(async () => {
    app = await startTestApp();
    user = await makeUser(app);
    if (onPostgres) {
      other = new pg.Client({ connectionString: app.databaseUrl });
      await other.connect();
      sql = (text, values) => other!.query(text, values);
    } else {
      sql = (text, values) => app.db.query(text, values);
    }
  });
  afterAll(async () => {
    await other?.end();
    await app.close();
  });

  const creds = (c: Client, secret = c.client_secret) => ({ client_id: c.client_id, client_secret: secret });
  const issue = (a: TestApp, c: Client, secret?: string) => a.http.post('/api/sso/token', { ...creds(c, secret), username: user.username });
  /** A client whose record this instance keeps (checked once, while listening). */
  const keptClient = async (a: TestApp = app, c?: Client) => {
    const client = c ?? await makeClient(a);
    expect((await issue(a, client)).status).toBe(200);
    await vi.waitFor(() => expect(a.services.clients.credentialCache().listening).toBe(true), { timeout: 5000, interval: 10 });
    const before = a.services.clients.credentialCache().kept;
    expect((await issue(a, client)).status).toBe(200);
    expect(a.services.clients.credentialCache().kept, 'the record is kept after a check while listening').toBeGreaterThanOrEqual(Math.min(before + 1, 1));
    return client;
  };

  it('keeps a client record after a credential check, and still refuses a wrong secret', async () => {
    const client = await keptClient();
    const kept = app.services.clients.credentialCache().kept;
    expect((await issue(app, client)).status).toBe(200);
    expect(app.services.clients.credentialCache().kept, 'served from memory: nothing new kept').toBe(kept);
    const wrong = await issue(app, client, 'not-the-secret');
    expect(wrong.status).toBe(401);
    expect(wrong.body.error).toBe('invalid_client');
  });

  it('refuses a secret replaced by plain SQL on the very next request, and accepts the new one', async () => {
    const client = await keptClient();
    const replacement = 'a-new-secret-set-by-sql-a-new-secret-set-by-sql';
    await sql('UPDATE clients SET secret_hash = $2, secret_last4 = right($3, 4) WHERE client_id = $1',
      [client.client_id, createHash('sha256').update(replacement).digest('hex'), replacement]);
    const old = await issue(app, client);
    expect(old.status, old.text).toBe(401);
    expect(old.body.error).toBe('invalid_client');
    expect((await issue(app, client, replacement)).status).toBe(200);
  });

  it('refuses a client deactivated by plain SQL on the very next request', async () => {
    const client = await keptClient();
    await sql('UPDATE clients SET active = false WHERE client_id = $1', [client.client_id]);
    const r = await issue(app, client);
    expect(r.status, r.text).toBe(401);
    expect(r.body.error).toBe('invalid_client');
  });

  it('applies an allow list changed by plain SQL on the very next request', async () => {
    const client = await keptClient();
    await sql(`UPDATE clients SET allowed_ips = '{203.0.113.7}' WHERE client_id = $1`, [client.client_id]);
    const r = await issue(app, client);
    expect(r.status, r.text).toBe(403);
    expect(r.body.error).toBe('ip_not_allowed');
    await sql(`UPDATE clients SET allowed_ips = '{127.0.0.1,::1}' WHERE client_id = $1`, [client.client_id]);
    expect((await issue(app, client)).status).toBe(200);
  });

  it('refuses a client deleted by plain SQL on the very next request', async () => {
    const client = await keptClient();
    await sql('DELETE FROM clients WHERE client_id = $1', [client.client_id]);
    expect((await issue(app, client)).status).toBe(401);
  });

  it('does not keep a client whose previous secret is in its grace (the database clock ends it)', async () => {
    const client = await keptClient();
    const kept = app.services.clients.credentialCache().kept;
    const { secret } = await app.services.clients.rotateSecret(client.client_id, { via: 'cli' }, { graceSeconds: 60 });
    expect((await issue(app, client)).status, 'the previous secret, in its grace').toBe(200);
    expect((await issue(app, client, secret)).status).toBe(200);
    // dropped by the rotation's announcement, which travels on a connection of its own and can
    // arrive after both answers (each was decided on the current row meanwhile)
    await expect.poll(() => app.services.clients.credentialCache().kept, { timeout: 10_000, interval: 20 }).toBe(kept - 1);
  });

  it.runIf(onPostgres)('a second instance on the same database refuses a secret the first rotated, at once', async () => {
    const second = await startTestApp({}, { db: app.db, databaseUrl: app.databaseUrl });
    try {
      const client = await keptClient(app);
      await keptClient(second, client);
      const rotated = await app.http.post(`/api/sso/token`, { ...creds(client), username: user.username });
      expect(rotated.status).toBe(200);
      const { secret } = await app.services.clients.rotateSecret(client.client_id, { via: 'cli' });
      const old = await issue(second, client);
      expect(old.status, old.text).toBe(401);
      expect((await issue(second, client, secret)).status).toBe(200);
      // and a change by plain SQL reaches both
      await sql('UPDATE clients SET active = false WHERE client_id = $1', [client.client_id]);
      expect((await issue(second, client, secret)).status).toBe(401);
      expect((await issue(app, client, secret)).status).toBe(401);
    } finally {
      await second.stop();
    }
  });

  it.runIf(onPostgres)('keeps nothing while its listening connection is lost, and misses no change made meanwhile', async () => {
    const client = await keptClient();
    const listener = () => sql(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'auth-service listen %'`);
    await listener();
    await vi.waitFor(() => expect(app.services.clients.credentialCache()).toStrictEqual({ listening: false, kept: 0 }), { timeout: 5000, interval: 10 });
    await sql('UPDATE clients SET active = false WHERE client_id = $1', [client.client_id]);
    expect((await issue(app, client)).status, 'read from the database while not listening').toBe(401);
    await vi.waitFor(() => expect(app.services.clients.credentialCache().listening).toBe(true), { timeout: 5000, interval: 20 });
    expect((await issue(app, client)).status, 'the change made while not listening is seen').toBe(401);
    await sql('UPDATE clients SET active = true WHERE client_id = $1', [client.client_id]);
    expect((await issue(app, client)).status).toBe(200);
  });

  it('keeps nothing with CLIENT_CACHE=false (a pooler in transaction mode cannot LISTEN)', async () => {
    const off = await startTestApp({ CLIENT_CACHE: 'false' }, { db: app.db, databaseUrl: app.databaseUrl });
    try {
      const client = await makeClient(off);
      for (let i = 0; i < 3; i++) expect((await issue(off, client)).status).toBe(200);
      await new Promise((r) => setTimeout(r, 50));
      expect((await issue(off, client)).status).toBe(200);
      expect(off.services.clients.credentialCache()).toStrictEqual({ listening: false, kept: 0 });
    } finally {
      await off.stop();
    }
  });
});
