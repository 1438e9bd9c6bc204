import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as jose from 'jose';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';

describe('server-to-server SSO flow', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  it('issues a token and validates it once, naming the user', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const issued = await app.http.post('/api/sso/token', { ...creds(client), username: user.username });
    expect(issued.status, issued.text).toBe(200);
    expect(typeof issued.body.token).toBe('string');
    expect(issued.headers['cache-control']).toBe('no-store');

    const redirect = new URL(issued.body.redirect_url);
    expect(`${redirect.origin}${redirect.pathname}`).toBe('https://client.example/sso/callback');
    expect(redirect.searchParams.get('from'), 'the callback query is kept').toBe('auth');
    expect(redirect.searchParams.get('token')).toBe(issued.body.token);

    const validated = await app.http.post('/api/sso/validate', { ...creds(client), token: issued.body.token });
    expect(validated.status, validated.text).toBe(200);
    expect(validated.body.user).toStrictEqual({ id: user.id, username: user.username, email: user.email, roles: [user.role], full_name: user.full_name });
    expect(validated.body.valid).toBe(true);
    expect(validated.body.expires_at).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
    expect(Number.isInteger(validated.body.user.id)).toBe(true);
    // no-store answers are never revalidated, so none spends a hash of its body on an ETag
    expect(issued.headers.etag).toBe(undefined);
    expect(validated.headers.etag).toBe(undefined);
  });

  it('gives each token a version-7 UUID as jti, in the order of issue (new keys at the right edge of the index), and validates it', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const jtis: string[] = [];
    for (let i = 0; i < 5; i++) {
      const issued = await app.http.post('/api/sso/token', { ...creds(client), username: user.username });
      expect(issued.status, issued.text).toBe(200);
      jtis.push(decode(issued.body.token).jti as string);
      if (i === 0) await new Promise((resolve) => setTimeout(resolve, 5)); // two milliseconds apart at least once
    }
    for (const jti of jtis) expect(jti).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set(jtis).size).toBe(5);
    expect([...jtis].sort()).toStrictEqual(jtis);
    // the first 48 bits are the time of issue, in milliseconds
    const issuedAt = Number.parseInt(jtis[0].replace(/-/g, '').slice(0, 12), 16);
    expect(Math.abs(issuedAt - Date.now())).toBeLessThan(60_000);
    const stored = await app.db.query<{ jti: string }>('SELECT jti::text AS jti FROM sso_tokens WHERE jti = ANY ($1::uuid[]) ORDER BY jti', [jtis]);
    expect(stored.rows.map((r) => r.jti)).toStrictEqual(jtis);
  });

  it('answers the token\'s roles claim and the user\'s full name in `user`, on both validate routes, the rest as before', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app, { role: 'editor', fullName: 'Ada Lovelace' });
    for (const path of ['/api/sso/validate', '/api/validate-token']) {
      const issued = await app.http.post('/api/sso/token', { ...creds(client), username: user.username });
      const roles = decode(issued.body.token).roles;
      expect(roles).toStrictEqual(['editor']);
      const validated = await app.http.post(path, { ...creds(client), token: issued.body.token });
      expect(validated.status, validated.text).toBe(200);
      // the order of the fields too: what was there stays where it was, the new ones follow
      expect(validated.text).toBe(JSON.stringify({
        valid: true,
        user: { id: user.id, username: user.username, email: user.email, roles, full_name: 'Ada Lovelace' },
        expires_at: validated.body.expires_at,
      }));
    }
  });

  it('signs exactly the claims of docs/contract.md (jti included), verifiable by an independent JWT library', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app, { role: 'editor' });
    const issued = await app.http.post('/api/sso/token', { ...creds(client), username: user.username });
    const key = new TextEncoder().encode(app.config.JWT_SECRET);
    const { payload, protectedHeader } = await jose.jwtVerify(issued.body.token, key, {
      issuer: 'auth-service',
      audience: 'client_applications',
      algorithms: ['HS256'],
    });
    expect(protectedHeader.alg).toBe('HS256');
    expect(Object.keys(payload).sort()).toStrictEqual([
      'aud', 'client_id', 'client_name', 'exp', 'iat', 'ip_address', 'iss', 'jti', 'roles', 'user_id', 'username',
    ]);
    expect(payload.user_id).toBe(String(user.id));
    expect(payload.username).toBe(user.username);
    expect(payload.client_id).toBe(client.client_id);
    expect(payload.client_name).toBe(client.client_name);
    expect(payload.roles).toStrictEqual(['editor']);
    expect(payload.ip_address).toBe('127.0.0.1');
    expect((payload.exp as number) - (payload.iat as number)).toBe(app.config.TOKEN_TTL_SECONDS);
  });

  it('binds the token to the end user IP the client names', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const issued = await app.http.post('/api/sso/token', { ...creds(client), username: user.username, ip_address: '203.0.113.9' });
    expect(decode(issued.body.token).ip_address).toBe('203.0.113.9');
    const wrongIp = await app.http.post('/api/sso/validate', { ...creds(client), token: issued.body.token, ip_address: '203.0.113.10' });
    expect(wrongIp.status).toBe(401);
    expect(wrongIp.body.error).toBe('ip_mismatch');
    const rightIp = await app.http.post('/api/sso/validate', { ...creds(client), token: issued.body.token, ip_address: '203.0.113.9' });
    expect(rightIp.status).toBe(200);
  });

  it('rejects a token validated twice', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const { body } = await app.http.post('/api/sso/token', { ...creds(client), username: user.username });
    expect((await app.http.post('/api/sso/validate', { ...creds(client), token: body.token })).status).toBe(200);
    const second = await app.http.post('/api/sso/validate', { ...creds(client), token: body.token });
    expect(second.status).toBe(401);
    expect({ valid: second.body.valid, error: second.body.error }).toStrictEqual({ valid: false, error: 'token_already_used' });
  });

  it('of 50 concurrent validations of one token exactly one succeeds', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const { body } = await app.http.post('/api/sso/token', { ...creds(client), username: user.username });
    const results = await Promise.all(
      Array.from({ length: 50 }, () => app.http.post('/api/sso/validate', { ...creds(client), token: body.token })),
    );
    expect(results.filter((r) => r.status === 200 && r.body.valid === true).length).toBe(1);
    expect(results.filter((r) => r.status === 401 && r.body.error === 'token_already_used').length).toBe(49);
  });

  it('answers 404 user_not_found for an unknown and for an inactive user', async () => {
    const client = await makeClient(app);
    const inactive = await makeUser(app, { active: false });
    for (const username of ['nobody-here', inactive.username]) {
      const r = await app.http.post('/api/sso/token', { ...creds(client), username });
      expect(r.status).toBe(404);
      expect(r.body.error).toBe('user_not_found');
    }
  });

  it('gives the same 401 for a wrong secret and an unknown client', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const wrong = await app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: 'nope', username: user.username });
    const unknown = await app.http.post('/api/sso/token', { client_id: 'no-such-client', client_secret: 'nope', username: user.username });
    expect(wrong.status).toBe(401);
    expect(wrong.body).toStrictEqual(unknown.body);
    expect(wrong.body.error).toBe('invalid_client');
    const validate = await app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: 'nope', token: 'x' });
    expect(validate.status).toBe(401);
    expect(validate.body.error).toBe('invalid_client');
  });

  it('finds the user whatever the case and spacing of the username', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const r = await app.http.post('/api/sso/token', { ...creds(client), username: ` ${user.username.toUpperCase()} ` });
    expect(r.status).toBe(200);
  });

  it('writes audit rows for issue and validation without the token', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const { body } = await app.http.post('/api/sso/token', { ...creds(client), username: user.username });
    await app.http.post('/api/sso/validate', { ...creds(client), token: body.token });
    await app.http.post('/api/sso/validate', { ...creds(client), token: body.token });
    const rows = (await app.db.query<{ action: string; outcome: string; details: unknown }>(
      'SELECT action, outcome, details FROM audit_log WHERE client_id = $1 ORDER BY id', [client.client_id])).rows;
    expect(rows.map((r) => `${r.action}:${r.outcome}`)).toStrictEqual([
      'client.create:success', 'token.issue:success', 'token.validate:success', 'token.validate:failure',
    ]);
    const all = JSON.stringify(rows);
    expect(all.includes(body.token)).toBe(false);
    expect(all.includes(body.token.split('.')[2]), 'no signature either').toBe(false);
    expect(all.includes(client.client_secret)).toBe(false);
  });
});

function creds(c: { client_id: string; client_secret: string }) {
  return { client_id: c.client_id, client_secret: c.client_secret };
}

function decode(token: string): Record<string, unknown> {
  return jose.decodeJwt(token);
}
