import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashClientSecret } from '../../src/clients/credentials.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeUser } from '../helpers/factories.ts';

/**
 * Whatever is in the clients table, no request answers 500 because of a client row. The
 * database's checks are switched off here (as a superuser could) to write rows they refuse.
 */
describe('client rows the database would refuse', () => {
  let app: TestApp;
  let username: string;
  const secret = 'a-secret-for-broken-rows';
  beforeAll(async () => {
    app = await startTestApp();
    username = (await makeUser(app)).username;
  });
  afterAll(() => app?.close());

  async function insertUnchecked(id: string, callback: string, ips: string[]): Promise<void> {
    await app.db.transaction(async (tx) => {
      await tx.exec(`ALTER TABLE clients DISABLE TRIGGER clients_before_write;
        ALTER TABLE clients DROP CONSTRAINT IF EXISTS clients_allowed_ips_valid;
        ALTER TABLE clients DROP CONSTRAINT IF EXISTS clients_callback_url_valid`);
      await tx.query('INSERT INTO clients (client_id, client_name, secret_hash, callback_url, allowed_ips) VALUES ($1, $1, $2, $3, $4)',
        [id, hashClientSecret(secret), callback, ips]);
      await tx.exec('ALTER TABLE clients ENABLE TRIGGER clients_before_write');
    });
  }
  const token = (id: string, localAddress = '127.0.0.1') =>
    app.http.post('/api/sso/token', { client_id: id, client_secret: secret, username }, { localAddress });

  it('an allow list of junk admits nobody and answers 403, never 500', async () => {
    await insertUnchecked('junk-ips', 'https://ok.example/cb', ['localhost', '10.0.0.0/33', ' 127.0.0.1', 'x/y/z']);
    const r = await token('junk-ips');
    expect(r.status).toBe(403);
    expect(r.body.error).toBe('ip_not_allowed');
  });

  it('a callback URL parsing cannot read is refused with 409 at the token endpoint and 400 on the sign-in page', async () => {
    // passes the database's check (a host and a port), but no URL parser accepts it
    await app.db.query('INSERT INTO clients (client_id, client_name, secret_hash, callback_url, allowed_ips) VALUES ($1, $1, $2, $3, $4)',
      ['bad-host', hashClientSecret(secret), 'http://1.2.3.999/cb', ['127.0.0.1']]);
    await insertUnchecked('bad-scheme', 'javascript:alert(1)', ['127.0.0.1']);
    for (const id of ['bad-host', 'bad-scheme']) {
      const r = await token(id);
      expect(r.status, id).toBe(409);
      expect(r.body.error).toBe('client_misconfigured');
      const page = await app.http.get(`/sso/login?client_id=${id}`);
      expect(page.status, id).toBe(400);
      expect(page.headers.location).toBeUndefined();
    }
    const issued = await app.db.query('SELECT count(*)::int AS n FROM sso_tokens WHERE client_id = ANY ($1::text[])', [['bad-host', 'bad-scheme']]);
    expect(issued.rows[0], 'no token is issued for such a client').toStrictEqual({ n: 0 });
  });
});
