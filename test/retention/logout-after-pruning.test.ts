import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prunePass } from '../../src/retention/pruner.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';

const jtiOf = (token: string): string => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).jti;

/**
 * README: a client system signs a user out with "any token it received for the user, used or
 * expired". A client keeps the token as long as the user stays signed in there, often longer
 * than TOKEN_RETENTION, after which the pruner has deleted the token's row.
 */
describe('a client system\'s logout with a token whose row was pruned', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ PRUNE_INTERVAL: '0', TOKEN_SWEEP_INTERVAL_MS: '3600000' });
  });
  afterAll(() => app.close());

  const aged = async (token: string) => {
    await app.db.query(`UPDATE sso_tokens SET issued_at = issued_at - interval '2 days', expires_at = expires_at - interval '2 days',
      used_at = used_at - interval '2 days' WHERE jti = $1`, [jtiOf(token)]);
    await prunePass(app.db, app.config);
    expect((await app.db.query('SELECT 1 FROM sso_tokens WHERE jti = $1', [jtiOf(token)])).rowCount, 'the row is pruned').toBe(0);
  };

  it('still signs the user out: unused tokens invalidated, user.logout audited', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const creds = { client_id: client.client_id, client_secret: client.client_secret };
    const issued = await app.http.post('/api/sso/token', { ...creds, username: user.username });
    expect((await app.http.post('/api/sso/validate', { ...creds, token: issued.body.token })).status).toBe(200);
    await aged(issued.body.token);
    const pending = await app.http.post('/api/sso/token', { ...creds, username: user.username });

    const logout = await app.http.post('/api/sso/logout', { ...creds, token: issued.body.token });
    expect({ status: logout.status, body: logout.body }).toStrictEqual({ status: 200, body: { success: true, invalidated_tokens: 1 } });
    expect((await app.http.post('/api/sso/validate', { ...creds, token: pending.body.token })).body.error).toBe('token_revoked');
    const audit = await app.db.query<{ user_id: number; client_id: string }>("SELECT user_id, client_id FROM audit_log WHERE action = 'user.logout' ORDER BY id DESC LIMIT 1");
    expect(audit.rows[0]).toStrictEqual({ user_id: user.id, client_id: client.client_id });
  });

  it('refuses it from another client, and for a user who no longer exists', async () => {
    const client = await makeClient(app);
    const other = await makeClient(app);
    const user = await makeUser(app);
    const creds = { client_id: client.client_id, client_secret: client.client_secret };
    const issued = await app.http.post('/api/sso/token', { ...creds, username: user.username });
    await app.http.post('/api/sso/validate', { ...creds, token: issued.body.token });
    await aged(issued.body.token);
    const elsewhere = await app.http.post('/api/sso/logout', { client_id: other.client_id, client_secret: other.client_secret, token: issued.body.token });
    expect([elsewhere.status, elsewhere.body.error]).toStrictEqual([401, 'invalid_token']);
    await app.db.query('DELETE FROM users WHERE id = $1', [user.id]);
    const gone = await app.http.post('/api/sso/logout', { ...creds, token: issued.body.token });
    expect([gone.status, gone.body.error]).toStrictEqual([401, 'invalid_token']);
  });
});
