import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateClientSecret, hashClientSecret } from '../../src/clients/credentials.ts';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { withClockBehind } from '../helpers/clock.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';

const jtiOf = (token: string): string => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).jti;
const DAYS = 86_400;

/**
 * README: a client system signs a user out with "any token it received for the user, used or
 * expired". A client keeps the token as long as the user stays signed in there, often longer
 * than TOKEN_RETENTION (1 day here), after which the pruner has deleted the token's row.
 */
describe('a client system\'s logout with a token whose row was pruned', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ PRUNE_INTERVAL: '0', TOKEN_SWEEP_INTERVAL_MS: '3600000', TOKEN_RETENTION: '1d' });
  });
  afterAll(() => app.close());

  /** A client registered three days ago (in SQL: the service dates a new one now). */
  async function oldClient(clientId = unique('old-')) {
    const secret = generateClientSecret();
    await app.db.query(`INSERT INTO clients (client_id, client_name, callback_url, allowed_ips, secret_hash, created_at)
      VALUES ($1, 'Old client', 'https://old.example/cb', '{127.0.0.1,::1}', $2, now() - interval '3 days')`, [clientId, hashClientSecret(secret)]);
    return { client_id: clientId, client_secret: secret };
  }

  /** A token issued two days ago, whose row the pruner has taken (removed here as it would). */
  async function prunedToken(creds: { client_id: string; client_secret: string }, username: string): Promise<string> {
    const issued = await withClockBehind(2 * DAYS, () => app.http.post('/api/sso/token', { ...creds, username }));
    expect(issued.status, issued.text).toBe(200);
    await app.db.query('DELETE FROM sso_tokens WHERE jti = $1', [jtiOf(issued.body.token)]);
    return issued.body.token;
  }

  it('still signs the user out: unused tokens invalidated, user.logout audited', async () => {
    const creds = await oldClient();
    const user = await makeUser(app);
    const kept = await prunedToken(creds, user.username);
    const pending = await app.http.post('/api/sso/token', { ...creds, username: user.username });
    const logout = await app.http.post('/api/sso/logout', { ...creds, token: kept });
    expect({ status: logout.status, body: logout.body }).toStrictEqual({ status: 200, body: { success: true, invalidated_tokens: 1 } });
    expect((await app.http.post('/api/sso/validate', { ...creds, token: pending.body.token })).body.error).toBe('token_revoked');
    const audit = await app.db.query<{ user_id: number; client_id: string }>("SELECT user_id, client_id FROM audit_log WHERE action = 'user.logout' ORDER BY id DESC LIMIT 1");
    expect(audit.rows[0]).toStrictEqual({ user_id: user.id, client_id: creds.client_id });
  });

  it('refuses a token whose row is gone though it is too young to have been pruned (never recorded, or removed by hand)', async () => {
    const client = await makeClient(app);
    const creds = { client_id: client.client_id, client_secret: client.client_secret };
    const young = await app.http.post('/api/sso/token', { ...creds, username: (await makeUser(app)).username });
    await app.db.query('DELETE FROM sso_tokens WHERE jti = $1', [jtiOf(young.body.token)]);
    const refused = await app.http.post('/api/sso/logout', { ...creds, token: young.body.token });
    expect([refused.status, refused.body.error]).toStrictEqual([401, 'invalid_token']);
  });

  it('refuses a deleted client\'s token at a client created again under its id, another client\'s, and one for a user who no longer exists', async () => {
    const user = await makeUser(app);
    const creds = await oldClient();
    const token = await prunedToken(creds, user.username);
    const other = await makeClient(app);
    const elsewhere = await app.http.post('/api/sso/logout', { client_id: other.client_id, client_secret: other.client_secret, token });
    expect([elsewhere.status, elsewhere.body.error], 'another client').toStrictEqual([401, 'invalid_token']);

    await app.db.query('DELETE FROM clients WHERE client_id = $1', [creds.client_id]);
    const fresh = await app.services.clients.createClient({ clientId: creds.client_id, name: 'New', callbackUrl: 'https://x.example/cb', allowedIps: ['127.0.0.1', '::1'] }, { via: 'cli' });
    const again = await app.http.post('/api/sso/logout', { client_id: creds.client_id, client_secret: fresh.secret, token });
    expect([again.status, again.body.error], 'a token the new client was never given').toStrictEqual([401, 'invalid_token']);

    const kept = await oldClient();
    const gone = await makeUser(app);
    const goneToken = await prunedToken(kept, gone.username);
    await app.db.query('DELETE FROM users WHERE id = $1', [gone.id]);
    const nobody = await app.http.post('/api/sso/logout', { ...kept, token: goneToken });
    expect([nobody.status, nobody.body.error], 'a user deleted since').toStrictEqual([401, 'invalid_token']);
  });

  it('with TOKEN_RETENTION=0 (nothing pruned) a missing row is never taken for a pruned one', async () => {
    const keep = await startTestApp({ TOKEN_RETENTION: '0' }, { db: app.db });
    try {
      const creds = await oldClient();
      const user = await makeUser(app);
      const token = await prunedToken(creds, user.username);
      const r = await keep.http.post('/api/sso/logout', { ...creds, token });
      expect([r.status, r.body.error]).toStrictEqual([401, 'invalid_token']);
    } finally {
      await keep.stop();
    }
  });
});
