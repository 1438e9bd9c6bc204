import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { holdLocks, waitForLockWaiters } from '../helpers/locks.ts';
import { linkAudit } from './support.ts';

/**
 * A link form sent twice (two tabs, a double submit) by the same user for the same name: both
 * requests find no link of the user's yet (src/links/service.ts request), both insert, and the
 * second's INSERT ... ON CONFLICT DO NOTHING meets the first's row on the primary key. That is
 * read as "another account holds or claimed this name": the user is told so about their own
 * claim, and the audit log records a refused claim (reason name_taken) that never happened.
 */
describe.runIf(onPostgres)('a link request sent twice at once by one user', () => {
  let app: TestApp;
  beforeAll(async () => { app = await startTestApp(); });
  afterAll(() => app?.close());

  it('is not answered or audited as a name taken by another account', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const ctx = { ipAddress: '127.0.0.1', userAgent: null };
    // both requests read (SELECT ... FOR UPDATE takes ROW SHARE) and then wait to insert
    const release = await holdLocks(app.db, 'LOCK TABLE user_client_links IN SHARE MODE');
    const both = [
      app.services.links.request(user, client.client_id, 'me.at.shop', ctx),
      app.services.links.request(user, client.client_id, 'me.at.shop', ctx),
    ].map((p) => p.then(() => 'ok', (err: { code?: string }) => err.code ?? String(err)));
    await waitForLockWaiters(app.db, 2);
    await release();
    const outcomes = await Promise.all(both);
    const audit = await linkAudit(app, user.id);
    expect(outcomes, 'the user\'s own claim reported as taken by another account').not.toContain('link_name_taken');
    expect(audit.filter((a) => a.outcome === 'failure'), 'a refused claim that no other account caused').toStrictEqual([]);
  });
});
