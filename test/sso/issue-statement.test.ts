import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Queryable } from '../../src/db/db.ts';
import { issueTokensByUsername, type IssueByUsernameRequest } from '../../src/sso/queries.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';

const claimsOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()) as Record<string, unknown>;

/**
 * A server-to-server token issue finds its user and records its token, audit row and
 * user.login event in one statement (src/sso/queries.ts, issueTokensByUsername), shared by
 * every issue that arrives in the same turn of the event loop.
 */
describe('token issue in one statement', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  it('answers each of many concurrent issues for its own user; unknown and inactive users get 404 and their failure audit rows', async () => {
    const client = await makeClient(app);
    const creds = { client_id: client.client_id, client_secret: client.client_secret };
    const active = await Promise.all(Array.from({ length: 8 }, (_, i) => makeUser(app, { role: i % 2 ? 'editor' : 'user' })));
    const inactive = await makeUser(app, { active: false });
    const asks = [
      ...active.map((user) => ({ username: user.username, user, expect: 200 })),
      ...active.slice(0, 3).map((user) => ({ username: ` ${user.username.toUpperCase()}`, user, expect: 200 })),
      { username: inactive.username, user: inactive, expect: 404 },
      { username: 'Nobody-Here-At-All', user: null, expect: 404 },
    ];
    const answers = await Promise.all(asks.map((a) => app.http.post('/api/sso/token', { ...creds, username: a.username })));

    const jtis = new Map<string, number>();
    asks.forEach((ask, i) => {
      const answer = answers[i];
      expect(answer.status, `${ask.username}: ${answer.text}`).toBe(ask.expect);
      if (ask.expect === 404) {
        expect(answer.body.error).toBe('user_not_found');
        return;
      }
      const claims = claimsOf(answer.body.token);
      expect(claims).toMatchObject({ user_id: String(ask.user!.id), username: ask.user!.username, roles: [ask.user!.role], client_id: client.client_id, ip_address: '127.0.0.1' });
      expect(new URL(answer.body.redirect_url).searchParams.get('token')).toBe(answer.body.token);
      jtis.set(claims.jti as string, ask.user!.id);
    });
    expect(jtis.size, 'every token its own jti').toBe(11);

    const audit = (await app.db.query<{ outcome: string; user_id: number | null; username: string; details: Record<string, unknown> }>(
      `SELECT outcome, user_id, username, details FROM audit_log WHERE action = 'token.issue' AND client_id = $1 ORDER BY id`, [client.client_id])).rows;
    const successes = audit.filter((r) => r.outcome === 'success');
    expect(successes.length).toBe(11);
    for (const row of successes) {
      expect(row.user_id, 'the audit row names the token\'s user').toBe(jtis.get(row.details.jti as string));
      expect(row.details).toStrictEqual({ jti: row.details.jti, flow: 'server_to_server', token_ip: '127.0.0.1' });
    }
    const failures = audit.filter((r) => r.outcome === 'failure').map(({ user_id, username, details }) => ({ user_id, username, details }));
    expect(failures.sort((a, b) => a.username.localeCompare(b.username))).toStrictEqual([
      { user_id: null, username: 'nobody-here-at-all', details: { reason: 'user_not_found' } },
      { user_id: inactive.id, username: inactive.username, details: { reason: 'user_inactive' } },
    ].sort((a, b) => a.username.localeCompare(b.username)));

    const rows = (await app.db.query<{ jti: string; user_id: number; username: string }>(
      'SELECT jti, user_id, username FROM sso_tokens WHERE client_id = $1', [client.client_id])).rows;
    expect(rows.length, 'a token row for each issued token, none for the refusals').toBe(11);
    for (const row of rows) expect(row.user_id).toBe(jtis.get(row.jti));
  });

  it('finds the users and writes every row in one round trip for a whole batch', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const inactive = await makeUser(app, { active: false });
    let statements = 0;
    const counting: Queryable = {
      query: (sql, params, options) => {
        statements++;
        return app.db.query(sql, params, options);
      },
      exec: (sql) => app.db.exec(sql),
    };
    const now = Date.now();
    const request = (username: string): IssueByUsernameRequest => ({
      jti: randomUUID(), username, clientId: client.client_id, tokenIp: '203.0.113.9', ipAddress: '127.0.0.1', userAgent: 'batch/1.0',
      issuedAt: new Date(now), expiresAt: new Date(now + 60_000),
    });
    const requests = [request(user.username), request('nobody-at-all'), request(inactive.username), request(user.username)];
    const outcomes = await issueTokensByUsername(counting, requests, () => null);
    expect(statements).toBe(1);
    const issued = { issued: true, user: { id: user.id, username: user.username, email: user.email, role: user.role, groups: [] } };
    expect(outcomes).toStrictEqual([issued, { issued: false, reason: 'user_not_found' }, { issued: false, reason: 'user_inactive' }, issued]);
    const tokens = await app.db.query<{ jti: string; ip_address: string }>('SELECT jti, ip_address FROM sso_tokens WHERE client_id = $1 ORDER BY jti', [client.client_id]);
    expect(tokens.rows).toStrictEqual([requests[0], requests[3]].map((r) => ({ jti: r.jti, ip_address: '203.0.113.9' })).sort((a, b) => a.jti.localeCompare(b.jti)));
  });
});
