import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sweepExpiredTokens } from '../../src/sso/expiry-sweep.ts';
import { createOutbox } from '../../src/webhooks/events.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { holdLocks, waitForLockWaiters } from '../helpers/locks.ts';

/**
 * A validation whose statement began before its token expired, and the expiry sweep that
 * announces the token expired unused once it has: one of the two, never both. PostgreSQL only
 * (the embedded database runs one statement at a time).
 */
describe.runIf(onPostgres)('a token expiring while its validation waits', () => {
  let app: TestApp;
  beforeAll(async () => {
    // no sweep or pruning of the instance's own meanwhile: the test runs the sweep itself
    app = await startTestApp({ TOKEN_SWEEP_INTERVAL_MS: '3600000', PRUNE_INTERVAL: '0' });
  });
  afterAll(() => app?.close());

  it('is not consumed once the sweep has announced it expired', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const issued = await app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username: user.username });
    expect(issued.status, issued.text).toBe(200);
    const jti = JSON.parse(Buffer.from(issued.body.token.split('.')[1], 'base64url').toString()).jti as string;
    // its row expires in two seconds (its signature's exp later, so the validation reaches the statement)
    const expiresAt = (await app.db.query<{ at: Date }>(
      "UPDATE sso_tokens SET expires_at = now() + interval '2 seconds' WHERE jti = $1 RETURNING expires_at AS at", [jti])).rows[0].at;
    // the validation's statement begins (its now() is taken) and then waits for a lock on users
    const release = await holdLocks(app.db, 'LOCK TABLE users IN ACCESS EXCLUSIVE MODE');
    const validating = app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token: issued.body.token });
    await waitForLockWaiters(app.db, 1);
    expect(Date.now(), 'the validation waits from before the expiry').toBeLessThan(expiresAt.getTime());
    await new Promise((resolve) => setTimeout(resolve, expiresAt.getTime() - Date.now() + 200));
    expect(await sweepExpiredTokens(app.db, createOutbox())).toBe(1);
    await release();
    const validated = await validating;
    expect(validated.body, validated.text).toMatchObject({ valid: false, error: 'token_expired' });
    const row = (await app.db.query<{ used: boolean; notified: boolean }>(
      'SELECT used_at IS NOT NULL AS used, expiry_notified_at IS NOT NULL AS notified FROM sso_tokens WHERE jti = $1', [jti])).rows[0];
    expect(row).toStrictEqual({ used: false, notified: true });
  });
});
