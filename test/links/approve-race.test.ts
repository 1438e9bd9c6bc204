import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { holdLocks, waitForLockWaiters } from '../helpers/locks.ts';
import { apiSession } from './support.ts';

/**
 * 073c1ee: approving a link with the name the administrator was shown answers 409
 * link_changed when the user has put another name in its place (docs/dashboard-links.md,
 * the approve operation's 409). The check reads the link FOR UPDATE; a replacement is a
 * DELETE and an INSERT of the row, so when the approval waits on the replacing transaction its
 * locked row is gone when it wakes.
 */
describe.runIf(onPostgres)('approving while the user replaces the claim (PostgreSQL: transactions at once)', () => {
  let app: TestApp;
  beforeAll(async () => { app = await startTestApp(); });
  afterAll(() => app?.close());

  it('answers 409 link_changed, not 404 "has no link" for a user who has a pending link', async () => {
    const client = await makeClient(app, { name: 'Race Shop' });
    const user = await makeUser(app);
    await app.services.links.request(user, client.client_id, 'mallory.shop', { ipAddress: '127.0.0.1', userAgent: null });
    const { as } = await apiSession(app, 'admin');

    // the user's replacement takes the link row first (its findLink FOR UPDATE); the approval queues behind it
    const release = await holdLocks(app.db, 'SELECT 1 FROM user_client_links WHERE user_id = $1 AND client_id = $2 FOR UPDATE', [user.id, client.client_id]);
    const replacing = app.services.links.request(user, client.client_id, 'shop-admin', { ipAddress: '127.0.0.1', userAgent: null });
    await waitForLockWaiters(app.db, 1);
    const approving = app.http.post(`/api/admin/users/${user.id}/links/${client.client_id}/approve`, { external_username: 'mallory.shop' }, as);
    await waitForLockWaiters(app.db, 2);
    await release();
    await replacing;
    const approved = await approving;

    const link = (await app.db.query<{ external_username: string; status: string }>(
      'SELECT external_username, status FROM user_client_links WHERE user_id = $1 AND client_id = $2', [user.id, client.client_id],
    )).rows;
    expect(link, 'the user has a pending link, with the new name').toStrictEqual([{ external_username: 'shop-admin', status: 'pending' }]);
    expect({ status: approved.status, body: approved.body }).toMatchObject({ status: 409, body: { error: 'link_changed' } });
  });
});
