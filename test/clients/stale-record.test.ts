import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';

type Client = Awaited<ReturnType<typeof makeClient>>;

/**
 * A client record kept in memory can predate a change whose announcement has not arrived yet
 * (src/clients/cache.ts). These tests change clients with the announcement switched off, so
 * the instance keeps the old record as long as they like, and check that nothing is ever
 * decided on it: the hot statements write only while the client's row is the one the record
 * was read from, and every other answer is decided again on the current row
 * (src/clients/guards.ts, onCurrentClient).
 */
describe('a client record overtaken by a change not yet announced', () => {
  let app: TestApp;
  let user: Awaited<ReturnType<typeof makeUser>>;
  beforeAll(async () => {
    app = await startTestApp({ RATE_LIMIT_TOKEN_PER_MIN: '1000' });
    user = await makeUser(app);
  });
  afterAll(() => app.close());

  const creds = (c: Client, secret = c.client_secret) => ({ client_id: c.client_id, client_secret: secret });
  const issue = (c: Client, secret?: string, a = app) => a.http.post('/api/sso/token', { ...creds(c, secret), username: user.username });
  const validate = (c: Client, token: string, secret?: string, path = '/api/sso/validate') => app.http.post(path, { ...creds(c, secret), token });
  const claimsOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()) as Record<string, unknown>;

  /** Waits until the instance listens for client changes (from its first credential check on). */
  const listening = (a: TestApp) => vi.waitFor(() => expect(a.services.clients.credentialCache().listening).toBe(true), { timeout: 5000, interval: 10 });

  /** A client whose record the instance keeps (checked once while listening). */
  async function keptClient(a = app): Promise<Client> {
    const client = await makeClient(a);
    expect((await issue(client, undefined, a)).status).toBe(200);
    await listening(a);
    const kept = a.services.clients.credentialCache().kept;
    expect((await issue(client, undefined, a)).status).toBe(200);
    expect(a.services.clients.credentialCache().kept).toBeGreaterThanOrEqual(Math.min(kept + 1, 1));
    return client;
  }

  /** Runs SQL on the clients table that no instance hears of (its change announcement switched off meanwhile). */
  async function unannounced(a: TestApp, sql: string, values: unknown[]): Promise<void> {
    await a.db.exec('ALTER TABLE clients DISABLE TRIGGER clients_notify_change');
    try {
      await a.db.query(sql, values);
    } finally {
      await a.db.exec('ALTER TABLE clients ENABLE TRIGGER clients_notify_change');
    }
  }

  const rotateSilently = async (client: Client, a = app) => {
    const secret = `rotated-by-sql-${client.client_id}-0123456789abcdef`;
    await unannounced(a, 'UPDATE clients SET secret_hash = $2, secret_last4 = right($3, 4) WHERE client_id = $1',
      [client.client_id, createHash('sha256').update(secret).digest('hex'), secret]);
    return secret;
  };

  const tokenRows = async (client: Client) => (await app.db.query<{ n: number }>('SELECT count(*)::int AS n FROM sso_tokens WHERE client_id = $1', [client.client_id])).rows[0].n;

  it('refuses the replaced secret without consuming the token, and takes the new one at once', async () => {
    const client = await keptClient();
    const { token } = (await issue(client)).body;
    const secret = await rotateSilently(client);

    const old = await validate(client, token);
    expect(old.status, old.text).toBe(401);
    expect(old.body.error).toBe('invalid_client');
    const ok = await validate(client, token, secret);
    expect(ok.status, `the token was not used up by the refused call: ${ok.text}`).toBe(200);
    expect(ok.body.user.id).toBe(user.id);
  });

  it('issues nothing for the replaced secret', async () => {
    const client = await keptClient();
    const secret = await rotateSilently(client);
    const before = await tokenRows(client);
    const old = await issue(client);
    expect(old.status, old.text).toBe(401);
    expect(old.body.error).toBe('invalid_client');
    // written another way, the request goes through Express's router and the same chain (src/routes/fast-path.ts)
    const viaExpress = await app.http.post('/api/sso/token?via=express', { ...creds(client), username: user.username });
    expect([viaExpress.status, viaExpress.body.error]).toStrictEqual([401, 'invalid_client']);
    expect(await tokenRows(client), 'no token row written').toBe(before);
    expect((await issue(client, secret)).status).toBe(200);
  });

  it('answers a deactivated client invalid_client, not what it says of the token', async () => {
    const client = await keptClient();
    const { token } = (await issue(client)).body;
    await unannounced(app, 'UPDATE clients SET active = false WHERE client_id = $1', [client.client_id]);
    for (const presented of ['not-a-jwt', token]) {
      const r = await validate(client, presented);
      expect(r.status, r.text).toBe(401);
      expect(r.body.error).toBe('invalid_client');
    }
    await unannounced(app, 'UPDATE clients SET active = true WHERE client_id = $1', [client.client_id]);
    expect((await validate(client, token)).status, 'the token is still unused').toBe(200);
  });

  it('applies a narrowed allow list on the very next call, and a widened one too', async () => {
    const client = await keptClient();
    const { token } = (await issue(client)).body;
    await unannounced(app, `UPDATE clients SET allowed_ips = '{203.0.113.7}' WHERE client_id = $1`, [client.client_id]);
    for (const r of [await issue(client), await validate(client, token, undefined, '/api/validate-token')]) {
      expect(r.status, r.text).toBe(403);
      expect(r.body.error).toBe('ip_not_allowed');
    }
    await unannounced(app, `UPDATE clients SET allowed_ips = '{127.0.0.1,::1}' WHERE client_id = $1`, [client.client_id]);
    expect((await validate(client, token, undefined, '/api/validate-token')).status, 'not used up by the refusal').toBe(200);
  });

  it('admits a caller an unannounced change added to the allow list', async () => {
    const client = await makeClient(app, { allowedIps: ['203.0.113.7'] });
    await keptClient(); // listening
    // validation (no allow list) keeps the record; token issue is refused by it
    expect((await validate(client, 'not-a-jwt')).body.error).toBe('invalid_token');
    expect((await issue(client)).status).toBe(403);
    await unannounced(app, `UPDATE clients SET allowed_ips = '{127.0.0.1,::1}' WHERE client_id = $1`, [client.client_id]);
    const r = await issue(client);
    expect(r.status, r.text).toBe(200);
  });

  it('issues a token that names the client as it is now, after a change that leaves its credentials good', async () => {
    const client = await keptClient();
    await unannounced(app, 'UPDATE clients SET client_name = $2 WHERE client_id = $1', [client.client_id, 'Renamed Without Announcement']);
    const r = await issue(client);
    expect(r.status, r.text).toBe(200);
    expect(claimsOf(r.body.token).client_name).toBe('Renamed Without Announcement');
    const v = await validate(client, r.body.token);
    expect(v.status, v.text).toBe(200);
  });

  it('decides again when the client changes between its read and the statement, and answers 503 to a client that keeps changing', async () => {
    const fresh = await startTestApp({ CLIENT_CACHE: 'false' }, { db: app.db, databaseUrl: app.databaseUrl });
    try {
      const client = await makeClient(fresh);
      const clients = fresh.services.clients;
      const { authenticateClient: read, authenticateClientFast: readFast } = clients;
      let changesLeft = 0;
      // the client's row is written right after a read, as by an administrator at that very moment
      const changeNow = async () => {
        if (changesLeft-- > 0) await fresh.db.query('UPDATE clients SET client_name = $2 WHERE client_id = $1', [client.client_id, `Renamed ${changesLeft}`]);
      };
      clients.authenticateClient = async (...args: Parameters<typeof read>) => {
        const record = await read(...args);
        await changeNow();
        return record;
      };
      clients.authenticateClientFast = async (...args: Parameters<typeof readFast>) => {
        const checked = await readFast(...args);
        await changeNow();
        return checked;
      };
      try {
        changesLeft = 1;
        const once = await issue(client, undefined, fresh);
        expect(once.status, once.text).toBe(200);
        expect(claimsOf(once.body.token).client_name, 'issued on the record read again').toBe('Renamed 0');
        const { token } = once.body;

        changesLeft = 2;
        const again = await fresh.http.post('/api/sso/validate', { ...creds(client), token });
        expect(again.status, again.text).toBe(503);
        expect(again.body.error).toBe('service_unavailable');
        expect(again.headers['retry-after']).toBe('1');
        changesLeft = 0;
        expect((await fresh.http.post('/api/sso/validate', { ...creds(client), token })).status, 'the token was not used up').toBe(200);
      } finally {
        Object.assign(clients, { authenticateClient: read, authenticateClientFast: readFast });
      }
    } finally {
      await fresh.stop();
    }
  });

  it('answers the replaced secret invalid_client even when the client is over its limit', async () => {
    const limited = await startTestApp({ RATE_LIMIT_TOKEN_PER_MIN: '3' }, { db: app.db, databaseUrl: app.databaseUrl });
    try {
      const client = await keptClient(limited);
      expect((await issue(client, undefined, limited)).status).toBe(200);
      expect((await issue(client, undefined, limited)).status, 'the limit holds').toBe(429);
      await unannounced(limited, 'UPDATE clients SET client_name = $2 WHERE client_id = $1', [client.client_id, 'Renamed While Limited']);
      const still = await issue(client, undefined, limited);
      expect(still.status, `a change that leaves the credentials good does not lift the limit: ${still.text}`).toBe(429);
      await rotateSilently(client, limited);
      const r = await issue(client, undefined, limited);
      expect(r.status, r.text).toBe(401);
      expect(r.body.error).toBe('invalid_client');
    } finally {
      await limited.stop();
    }
  });

  it('drops a kept record once the current one is in a secret\'s grace, instead of serving the older one', async () => {
    const client = await keptClient();
    const kept = app.services.clients.credentialCache().kept;
    const replacement = 'rotated-with-grace-0123456789abcdef0123456789';
    await unannounced(app, `UPDATE clients SET previous_secret_hash = secret_hash, previous_secret_expires_at = now() + interval '1 minute',
        secret_hash = $2, secret_last4 = right($3, 4) WHERE client_id = $1`,
    [client.client_id, createHash('sha256').update(replacement).digest('hex'), replacement]);
    const old = await issue(client);
    expect(old.status, `the previous secret, in its grace: ${old.text}`).toBe(200);
    expect(app.services.clients.credentialCache().kept, 'the overtaken record is no longer kept').toBe(kept - 1);
    expect((await issue(client, replacement)).status).toBe(200);
  });
});
