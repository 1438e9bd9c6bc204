import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consumeTokens } from '../../src/sso/consume-queries.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';

/**
 * Validations and credential checks that arrive together share one statement
 * (src/db/batch.ts). These tests send many at once and check that every answer still
 * belongs to its own request: the right user for each token, one winner per token, the
 * right verdict for each secret.
 */
describe('requests that share a batch', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  const creds = (c: { client_id: string; client_secret: string }) => ({ client_id: c.client_id, client_secret: c.client_secret });

  it('answers each of many concurrent validations with its own token\'s user, once per token', async () => {
    const client = await makeClient(app);
    const other = await makeClient(app);
    const users = await Promise.all(Array.from({ length: 12 }, () => makeUser(app)));
    const issued = [];
    for (const user of users) {
      const r = await app.http.post('/api/sso/token', { ...creds(client), username: user.username });
      expect(r.status, r.text).toBe(200);
      issued.push({ token: r.body.token as string, user });
    }
    // Every token presented three times by its client and once by another, all at once.
    const calls = issued.flatMap(({ token, user }) => [
      ...Array.from({ length: 3 }, () => ({ token, user, caller: client })),
      { token, user, caller: other },
    ]);
    const answers = await Promise.all(calls.map((c) => app.http.post('/api/sso/validate', { ...creds(c.caller), token: c.token })));

    for (const { token, user } of issued) {
      const mine = calls.map((c, i) => ({ ...c, answer: answers[i] })).filter((c) => c.token === token);
      const wins = mine.filter((c) => c.answer.status === 200);
      expect(wins.length, `exactly one validation of ${user.username}'s token succeeds`).toBe(1);
      expect(wins[0].caller, 'and it is the issuing client\'s').toBe(client);
      expect(wins[0].answer.body.user).toStrictEqual({ id: user.id, username: user.username, email: user.email, roles: [user.role], full_name: user.full_name });
      for (const loser of mine.filter((c) => c.answer.status !== 200)) {
        expect(loser.answer.status).toBe(401);
        expect(loser.answer.body.valid).toBe(false);
        expect(loser.answer.body.error).toBe(loser.caller === client ? 'token_already_used' : 'invalid_token');
      }
    }
    const audit = await app.db.query<{ user_id: number; jti: string }>(
      `SELECT user_id, details->>'jti' AS jti FROM audit_log WHERE action = 'token.validate' AND outcome = 'success' AND client_id = $1`,
      [client.client_id],
    );
    expect(audit.rows.length, 'one success audit row per token').toBe(issued.length);
    const jtiOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).jti as string;
    for (const { token, user } of issued) {
      expect(audit.rows.filter((row) => row.jti === jtiOf(token)).map((row) => row.user_id)).toStrictEqual([user.id]);
    }
  });

  it('gives each concurrent credential check its own verdict', async () => {
    const a = await makeClient(app);
    const b = await makeClient(app);
    const user = await makeUser(app);
    const calls = Array.from({ length: 40 }, (_, i) => {
      const c = i % 2 === 0 ? a : b;
      const right = i % 4 < 2;
      return { right, body: { client_id: c.client_id, client_secret: right ? c.client_secret : `${c.client_secret}x`, username: user.username } };
    });
    const answers = await Promise.all(calls.map((c) => app.http.post('/api/sso/token', c.body)));
    calls.forEach((c, i) => {
      expect(answers[i].status, `call ${i}`).toBe(c.right ? 200 : 401);
      if (!c.right) expect(answers[i].body.error).toBe('invalid_client');
    });
  });

  it('consumeTokens maps each result to its request: duplicates, strangers and unknown ids in one statement', async () => {
    const client = await makeClient(app);
    const other = await makeClient(app);
    const alice = await makeUser(app);
    const bob = await makeUser(app);
    const jtiOf = async (username: string) => {
      const r = await app.http.post('/api/sso/token', { ...creds(client), username });
      return JSON.parse(Buffer.from((r.body.token as string).split('.')[1], 'base64url').toString()).jti as string;
    };
    const aliceJti = await jtiOf(alice.username);
    const bobJti = await jtiOf(bob.username);
    const req = (jti: string, clientId: string) => ({ jti, clientId, ipAddress: '127.0.0.1', userAgent: 'test' });

    const result = await consumeTokens(app.db, [
      req(randomUUID(), client.client_id), // unknown
      req(bobJti, other.client_id), // not the issuing client
      req(aliceJti, client.client_id),
      req(aliceJti, client.client_id), // the same token twice in one batch
      req(bobJti, client.client_id),
    ]);
    expect(result.length).toBe(5);
    expect(result[0]).toBe(null);
    expect(result[1]).toBe(null);
    expect(result[4]).toMatchObject({ user_id: bob.id, username: bob.username });
    const aliceWins = [result[2], result[3]].filter((x) => x !== null);
    expect(aliceWins.length, 'one of the two requests for one token wins').toBe(1);
    expect(aliceWins[0]).toMatchObject({ user_id: alice.id });
    expect(await consumeTokens(app.db, [req(aliceJti, client.client_id), req(bobJti, client.client_id)])).toStrictEqual([null, null]);
    expect(await consumeTokens(app.db, [])).toStrictEqual([]);
  });
});
