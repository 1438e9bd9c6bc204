import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { withClockBehind } from '../helpers/clock.ts';
import { createMigratedTestDatabase } from '../helpers/db.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { writeTogether } from '../../src/db/statement.ts';
import { deliveryRows } from '../../src/webhooks/event-queries.ts';
import { EVENT_TYPES } from '../../src/webhooks/events.ts';
import { verifyWebhook } from '../../src/webhooks/verify.ts';
import { adminHeaders, eventually, type Receiver, registerWebhook, sleep, startReceiver } from './receiver.ts';

const SECRET = 'instances-secret-0123456789';
const failsFirst = (deliveryId: string) => deliveryId.at(-1)! < '5';

describe('two service instances on one database', () => {
  let database: Awaited<ReturnType<typeof createMigratedTestDatabase>>;
  let a: TestApp;
  let b: TestApp;
  let receiver: Receiver;
  beforeAll(async () => {
    database = await createMigratedTestDatabase();
    const env = { TOKEN_TTL_SECONDS: '5', TOKEN_SWEEP_INTERVAL_MS: '100', WEBHOOK_BACKOFF_MS: '50' };
    a = await startTestApp(env, { db: database.db });
    b = await startTestApp(env, { db: database.db });
    // The first attempt of deliveries whose id ends in 0-4 fails (about a third), so their
    // retries are claimed by whichever instance polls first.
    const seen = new Map<string, number>();
    receiver = await startReceiver((r) => {
      const id = String(r.headers['x-auth-delivery']);
      seen.set(id, (seen.get(id) ?? 0) + 1);
      return failsFirst(id) && seen.get(id) === 1 ? 503 : 200;
    });
    await registerWebhook(a, await adminHeaders(a), { url: receiver.url, events: [...EVENT_TYPES], secret: SECRET });
  });
  afterAll(async () => {
    await receiver.close();
    await a.stop();
    await b.stop();
    await database.drop();
  });

  it('deliver every event exactly once, and send one token.expired per expired token', async () => {
    const client = await makeClient(a);
    const users = await Promise.all(Array.from({ length: 4 }, () => makeUser(a)));
    const creds = { client_id: client.client_id, client_secret: client.client_secret };

    // Events written through both instances at once (the tokens issued as if 4 s ago: they
    // expire within a second instead of after TOKEN_TTL_SECONDS)...
    const issued = await withClockBehind(4, () => Promise.all(Array.from({ length: 30 }, (_, i) =>
      (i % 2 ? a : b).http.post('/api/sso/token', { ...creds, username: users[i % users.length].username }))));
    for (const r of issued) expect(r.status, r.text).toBe(200);
    // ...and a burst nobody wakes a dispatcher for: both instances' poll loops race to claim it.
    const burst = Array.from({ length: 60 }, (_, i) => ({ client_id: `burst-${i}`, client_name: `Burst ${i}` }));
    await writeTogether(database.db, [deliveryRows('client.registered', burst)]); // the rows alone: no after-commit step

    const jtis = issued.map((r) => JSON.parse(Buffer.from(r.body.token.split('.')[1], 'base64url').toString()).jti as string);
    const expected = 1 /* makeClient */ + 30 /* user.login */ + 60 /* burst */ + 30 /* token.expired */;
    await eventually(async () => {
      const r = await database.db.query<{ done: number; total: number }>(
        `SELECT count(*) FILTER (WHERE status = 'succeeded')::int AS done, count(*)::int AS total FROM webhook_deliveries`);
      return r.rows[0].total === expected && r.rows[0].done === expected;
    }, 30_000, `all ${expected} deliveries to succeed`);
    await sleep(1000); // a couple more polls and sweeps on both instances: nothing further arrives

    const attemptsPerDelivery = new Map<string, number>();
    for (const r of receiver.received) {
      const id = String(r.headers['x-auth-delivery']);
      attemptsPerDelivery.set(id, (attemptsPerDelivery.get(id) ?? 0) + 1);
      verifyWebhook(r.raw, r.headers, SECRET, { toleranceSeconds: 60 });
    }
    const rows = await database.db.query<{ id: string; attempts: number }>('SELECT id, attempts FROM webhook_deliveries');
    for (const row of rows.rows) {
      expect(attemptsPerDelivery.get(row.id), `delivery ${row.id}: each attempt sent once`).toBe(row.attempts);
      expect(row.attempts, `delivery ${row.id}`).toBe(failsFirst(row.id) ? 2 : 1);
    }
    expect(attemptsPerDelivery.size, 'no unknown deliveries arrived').toBe(expected);

    expect(new Set(receiver.of('user.login').map((r) => r.headers['x-auth-delivery'])).size).toBe(30);
    const bursts = new Set(receiver.of('client.registered').map((r) => r.body.data.client_id));
    expect(bursts.size).toBe(61);

    const expiredIds = receiver.of('token.expired').map((r) => r.body.data.token_id as string);
    expect(new Set(expiredIds).size, 'one token.expired per token').toBe(30);
    expect([...new Set(expiredIds)].sort()).toStrictEqual([...jtis].sort());
    const marked = await database.db.query<{ n: number }>('SELECT count(*)::int AS n FROM sso_tokens WHERE expiry_notified_at IS NOT NULL');
    expect(marked.rows[0].n).toBe(30);
  });
});
