import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { holdLocks, waitForLockWaiters } from '../helpers/locks.ts';
import { adminHeaders, eventually, registerWebhook, sleep, startHeldReceiver, startReceiver } from './receiver.ts';

/**
 * An event's delivery rows are written for the webhooks its statement reads as active and
 * subscribed, while an administrator (or a receiver's 410) may be deleting, turning off or
 * unsubscribing one of them in a transaction of its own. These are the orders in which the
 * two meet on PostgreSQL, forced by holding row locks from a second connection; the embedded
 * database has one connection, so there they cannot meet.
 */
describe.runIf(onPostgres)('webhook changes meeting the events they concern', () => {
  let app: TestApp;
  let headers: Record<string, string>;
  beforeAll(async () => {
    // retries wait an hour: nothing is attempted again during a test; the first failed
    // sign-in of a name locks it
    app = await startTestApp({ WEBHOOK_BACKOFF_MS: '3600000', LOCKOUT_THRESHOLD: '1' });
    headers = await adminHeaders(app);
  });
  afterAll(() => app?.close());

  const deliveries = async (webhookId: number) =>
    (await app.db.query<{ status: string; event: string }>('SELECT status, event FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY created_at', [webhookId])).rows;
  /** A pending delivery of `webhookId` not due for an hour (so no dispatcher takes it). */
  const pendingDelivery = async (webhookId: number) =>
    (await app.db.query<{ id: string }>(
      "INSERT INTO webhook_deliveries (id, webhook_id, event, data, next_attempt_at) VALUES (gen_random_uuid(), $1, 'user.login', '{}', now() + interval '1 hour') RETURNING id",
      [webhookId],
    )).rows[0].id;

  it('a token issue whose webhook is deleted while its statement runs is issued, and its other webhooks get the event', async () => {
    const kept = await startReceiver();
    const removed = await startReceiver();
    try {
      const client = await makeClient(app);
      const user = await makeUser(app);
      const keptId = await registerWebhook(app, headers, { url: kept.url, events: ['user.login'] });
      const removedId = await registerWebhook(app, headers, { url: removed.url, events: ['user.login'] });
      // the deletion holds the webhook's row until it commits; the issue reads the row as it was
      const release = await holdLocks(app.db, 'DELETE FROM webhooks WHERE id = $1', [removedId]);
      const issuing = app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username: user.username });
      await waitForLockWaiters(app.db, 1);
      await release();
      const issued = await issuing;
      expect(issued.status, issued.text).toBe(200);
      const validated = await app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: client.client_secret, token: issued.body.token });
      expect(validated.body).toMatchObject({ valid: true });
      await kept.waitFor(() => kept.received.length === 1);
      expect(kept.received[0].body).toMatchObject({ event: 'user.login', data: { user_id: user.id } });
      expect(removed.received).toStrictEqual([]);
      await app.db.query('DELETE FROM webhooks WHERE id = $1', [keptId]);
    } finally {
      await kept.close();
      await removed.close();
    }
  });

  it('an event recorded while an administrator turns its webhook off is closed with the others, never left pending', async () => {
    const receiver = await startReceiver();
    try {
      const user = await makeUser(app);
      const id = await registerWebhook(app, headers, { url: receiver.url, events: ['user.login'] });
      // turning it off locks the webhook, then closes its pending deliveries: holding one stops it there
      const waiting = await pendingDelivery(id);
      const release = await holdLocks(app.db, 'SELECT 1 FROM webhook_deliveries WHERE id = $1 FOR UPDATE', [waiting]);
      const disabling = app.http.patch(`/api/webhooks/${id}`, { active: false }, { headers });
      await waitForLockWaiters(app.db, 1);
      // a sign-in records user.login in its own transaction, for the webhook it reads as active
      const signingIn = app.http.post('/api/login', { username: user.username, password: user.password });
      await Promise.race([signingIn, waitForLockWaiters(app.db, 2)]);
      await release();
      const [disabled, signedIn] = await Promise.all([disabling, signingIn]);
      expect(disabled.status, disabled.text).toBe(200);
      expect(signedIn.status, signedIn.text).toBe(200);
      expect(await deliveries(id), 'nothing waits for a webhook that is off').toStrictEqual([{ status: 'failed', event: 'user.login' }]);
      await sleep(200);
      expect(receiver.received).toStrictEqual([]);
    } finally {
      await receiver.close();
    }
  });

  it('a delivery sent again while an administrator turns its webhook off is refused, not left pending', async () => {
    const receiver = await startReceiver();
    try {
      const id = await registerWebhook(app, headers, { url: receiver.url, events: ['user.login'] });
      const finished = (await app.db.query<{ id: string }>(
        "INSERT INTO webhook_deliveries (id, webhook_id, event, data, status, completed_at) VALUES (gen_random_uuid(), $1, 'user.login', '{}', 'failed', now()) RETURNING id",
        [id],
      )).rows[0].id;
      const waiting = await pendingDelivery(id);
      const release = await holdLocks(app.db, 'SELECT 1 FROM webhook_deliveries WHERE id = $1 FOR UPDATE', [waiting]);
      const disabling = app.http.patch(`/api/webhooks/${id}`, { active: false }, { headers });
      await waitForLockWaiters(app.db, 1);
      const resending = app.http.post(`/api/webhooks/${id}/deliveries/${finished}/redeliver`, {}, { headers });
      await Promise.race([resending, waitForLockWaiters(app.db, 2)]);
      await release();
      const [disabled, resent] = await Promise.all([disabling, resending]);
      expect(disabled.status, disabled.text).toBe(200);
      expect([resent.status, resent.body.error], resent.text).toStrictEqual([409, 'webhook_inactive']);
      expect(await deliveries(id)).toStrictEqual([{ status: 'failed', event: 'user.login' }, { status: 'failed', event: 'user.login' }]);
      await sleep(200);
      expect(receiver.received).toStrictEqual([]);
    } finally {
      await receiver.close();
    }
  });

  it('an event recorded while a receiver\'s 410 turns its webhook off is closed with the others, never left pending', async () => {
    const gone = await startHeldReceiver(Infinity, () => 410); // every attempt answered 410 once opened
    const other = await startReceiver();
    try {
      const user = await makeUser(app);
      const goneId = await registerWebhook(app, headers, { url: gone.url, events: ['user.login_failed'] });
      const otherId = await registerWebhook(app, headers, { url: other.url, events: ['user.locked'] });
      // a first event, its attempt held open until the receiver is told to answer 410
      const first = await app.http.post('/api/login', { username: `nobody-${user.username}`, password: 'not the password' });
      expect([first.status, first.body.locked]).toStrictEqual([401, true]);
      // (waitFor is told of a request once it is answered; this one is not, yet)
      await eventually(async () => gone.received.length === 1, 10_000, 'the first attempt');
      // a failure that locks records user.login_failed, then user.locked: holding the other
      // webhook's row stops it there, its first event written and not yet committed
      const release = await holdLocks(app.db, 'SELECT 1 FROM webhooks WHERE id = $1 FOR UPDATE', [otherId]);
      const locking = app.http.post('/api/login', { username: user.username, password: 'not the password' });
      await waitForLockWaiters(app.db, 1);
      gone.open();
      const isOff = async () => !(await app.db.query<{ active: boolean }>('SELECT active FROM webhooks WHERE id = $1', [goneId])).rows[0].active;
      // the 410 waits for that transaction, or (had it not to) has turned the webhook off already
      await Promise.race([waitForLockWaiters(app.db, 2), eventually(isOff, 10_000, 'the 410 to turn the webhook off')]);
      await release();
      expect((await locking).status).toBe(401);
      await eventually(isOff, 10_000, 'the 410 to turn the webhook off');
      await eventually(async () => (await deliveries(goneId)).length === 2 && (await deliveries(goneId)).every((d) => d.status === 'failed'), 10_000, 'both deliveries closed');
      await other.waitFor(() => other.received.length === 1);
      expect(other.received[0].body).toMatchObject({ event: 'user.locked', data: { user_id: user.id } });
      await sleep(200);
      expect(gone.received, 'nothing is sent after the 410').toHaveLength(1);
      await app.db.query('DELETE FROM webhooks WHERE id = ANY($1::int[])', [[goneId, otherId]]);
    } finally {
      await gone.close();
      await other.close();
    }
  });

  it('a delivery falling due while a receiver\'s 410 is turning its webhook off is not claimed: it is closed with the others', async () => {
    const gone = await startHeldReceiver(Infinity, () => 410); // every attempt answered 410 once opened
    const other = await startReceiver();
    try {
      const goneId = await registerWebhook(app, headers, { url: gone.url, events: ['user.login'] });
      const otherId = await registerWebhook(app, headers, { url: other.url, events: ['user.login'] });
      const first = (await app.db.query<{ id: string }>(
        "INSERT INTO webhook_deliveries (id, webhook_id, event, data) VALUES (gen_random_uuid(), $1, 'user.login', '{}') RETURNING id",
        [goneId],
      )).rows[0].id;
      await eventually(async () => gone.received.length === 1, 10_000, 'the first attempt');
      // not due yet, so no claim takes them before the 410 is under way
      const later = await pendingDelivery(goneId);
      const control = await pendingDelivery(otherId);
      // holding the first delivery stops the 410's transaction after it locked the webhook
      // FOR UPDATE, before it closes the pending deliveries: the moment a claim can meet it
      const release = await holdLocks(app.db, 'SELECT 1 FROM webhook_deliveries WHERE id = $1 FOR UPDATE', [first]);
      gone.open();
      await waitForLockWaiters(app.db, 1);
      await app.db.query('UPDATE webhook_deliveries SET next_attempt_at = now() WHERE id = ANY($1::uuid[])', [[later, control]]);
      // a claim has run since both fell due: the other webhook's went out
      await other.waitFor(() => other.received.length === 1);
      await sleep(200);
      expect(gone.received, 'nothing is claimed for a webhook being turned off').toHaveLength(1);
      await release();
      await eventually(async () => (await deliveries(goneId)).every((d) => d.status === 'failed'), 10_000, 'both deliveries closed');
      expect(gone.received, 'nothing is sent after the 410').toHaveLength(1);
      await app.db.query('DELETE FROM webhooks WHERE id = ANY($1::int[])', [[goneId, otherId]]);
    } finally {
      await gone.close();
      await other.close();
    }
  });

  it('a client registered while a subscribed webhook is being deleted is registered (client.registered, written by the clients table\'s trigger)', async () => {
    const receiver = await startReceiver();
    try {
      const id = await registerWebhook(app, headers, { url: receiver.url, events: ['client.registered'] });
      const release = await holdLocks(app.db, 'DELETE FROM webhooks WHERE id = $1', [id]);
      const creating = app.http.post('/api/admin/clients', { client_name: 'Raced Shop', callback_url: 'https://raced.example/cb', allowed_ips: ['127.0.0.1'] }, { headers });
      await waitForLockWaiters(app.db, 1);
      await release();
      const created = await creating;
      expect(created.status, created.text).toBe(201);
    } finally {
      await receiver.close();
    }
  });

  it('a client registered while a subscribed webhook is turned off leaves no client.registered delivery pending for it', async () => {
    const receiver = await startReceiver();
    try {
      const id = await registerWebhook(app, headers, { url: receiver.url, events: ['client.registered'] });
      // a pending delivery not due for an hour; holding it stops the disabling after it locked the webhook
      const waiting = (await app.db.query<{ id: string }>(
        "INSERT INTO webhook_deliveries (id, webhook_id, event, data, next_attempt_at) VALUES (gen_random_uuid(), $1, 'client.registered', '{}', now() + interval '1 hour') RETURNING id",
        [id],
      )).rows[0].id;
      const release = await holdLocks(app.db, 'SELECT 1 FROM webhook_deliveries WHERE id = $1 FOR UPDATE', [waiting]);
      const disabling = app.http.patch(`/api/webhooks/${id}`, { active: false }, { headers });
      await waitForLockWaiters(app.db, 1);
      const creating = app.http.post('/api/admin/clients', { client_name: 'Raced Shop 2', callback_url: 'https://raced2.example/cb', allowed_ips: ['127.0.0.1'] }, { headers });
      await Promise.race([creating, waitForLockWaiters(app.db, 2)]);
      await release();
      const [disabled, created] = await Promise.all([disabling, creating]);
      expect(disabled.status, disabled.text).toBe(200);
      expect(created.status, created.text).toBe(201);
      const rows = await app.db.query<{ status: string }>('SELECT status FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY created_at', [id]);
      expect(rows.rows.map((r) => r.status), 'nothing waits for a webhook that is off').toStrictEqual(['failed']);
    } finally {
      await receiver.close();
    }
  });
});
