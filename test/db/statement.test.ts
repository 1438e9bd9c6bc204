import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditRows } from '../../src/audit/writer.ts';
import { writeTogether } from '../../src/db/statement.ts';
import { issuedTokenRows, type IssuedTokenRow } from '../../src/sso/queries.ts';
import { deliveryRows as eventDeliveries } from '../../src/webhooks/event-queries.ts';
import { createMigratedDatabase } from '../helpers/app.ts';
import { insertUserAndClient } from '../helpers/factories.ts';

describe('writes composed into one statement', () => {
  let t: Awaited<ReturnType<typeof createMigratedDatabase>>;
  let userId: number;
  let webhookId: number;
  beforeAll(async () => {
    t = await createMigratedDatabase();
    ({ userId } = await insertUserAndClient(t.db, 'compose'));
    webhookId = (await t.db.query<{ id: number }>(
      "INSERT INTO webhooks (url, events, secret) VALUES ('https://hooks.example/in', '{user.login}', 'sixteen-chars-secret') RETURNING id")).rows[0].id;
  });
  afterAll(() => t.drop());

  const token = (user: number, username: string): IssuedTokenRow => ({
    jti: randomUUID(), userId: user, clientId: 'compose', username, ipAddress: '192.0.2.7',
    issuedAt: new Date(), expiresAt: new Date(Date.now() + 60_000),
  });

  it('writes every part, each with its own values (placeholders numbered across the parts)', async () => {
    const rows = [token(userId, 'first'), token(userId, 'second')];
    await writeTogether(t.db, [
      issuedTokenRows(rows),
      null,
      auditRows(rows.map((r) => ({ action: 'compose.test', outcome: 'success' as const, userId, details: { jti: r.jti } }))),
      eventDeliveries('user.login', rows.map((r) => ({ user_id: userId, jti: r.jti }))),
    ]);
    const tokens = await t.db.query<{ jti: string; username: string; ip_address: string }>(
      'SELECT jti, username, ip_address FROM sso_tokens WHERE jti = ANY ($1::uuid[]) ORDER BY username', [rows.map((r) => r.jti)]);
    expect(tokens.rows).toStrictEqual([
      { jti: rows[0].jti, username: 'first', ip_address: '192.0.2.7' },
      { jti: rows[1].jti, username: 'second', ip_address: '192.0.2.7' },
    ]);
    const audit = await t.db.query<{ jti: string }>("SELECT details->>'jti' AS jti FROM audit_log WHERE action = 'compose.test' ORDER BY id");
    expect(audit.rows.map((r) => r.jti), 'audit rows in the order given').toStrictEqual(rows.map((r) => r.jti));
    const deliveries = await t.db.query<{ jti: string; webhook_id: number; event: string }>(
      "SELECT data->>'jti' AS jti, webhook_id, event FROM webhook_deliveries WHERE data->>'jti' = ANY ($1::text[]) ORDER BY created_at, data->>'jti'",
      [rows.map((r) => r.jti)]);
    expect(deliveries.rows.map((r) => [r.webhook_id, r.event])).toStrictEqual([[webhookId, 'user.login'], [webhookId, 'user.login']]);
    expect(deliveries.rows.map((r) => r.jti).sort()).toStrictEqual(rows.map((r) => r.jti).sort());
  });

  it('is atomic: when one part is refused, the others write nothing', async () => {
    const taken = token(userId, 'first holder');
    await writeTogether(t.db, [issuedTokenRows([taken])]);
    const again = { ...token(userId, 'again'), jti: taken.jti }; // a jti already stored: a unique violation
    await expect(writeTogether(t.db, [
      auditRows([{ action: 'compose.atomic', outcome: 'success', details: { jti: again.jti } }]),
      eventDeliveries('user.login', [{ jti: again.jti }]),
      issuedTokenRows([again]),
    ])).rejects.toThrow(/duplicate key/);
    expect((await t.db.query("SELECT 1 FROM audit_log WHERE action = 'compose.atomic'")).rowCount).toBe(0);
    expect((await t.db.query("SELECT 1 FROM webhook_deliveries WHERE data->>'jti' = $1", [again.jti])).rowCount).toBe(0);
  });
});
