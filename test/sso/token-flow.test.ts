import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as jose from 'jose';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';

describe('server-to-server SSO flow', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(() => app.close());

  it('issues a token and validates it once, naming the user', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const issued = await app.http.post('/api/sso/token', { ...creds(client), username: user.username });
    assert.equal(issued.status, 200, issued.text);
    assert.equal(typeof issued.body.token, 'string');
    assert.equal(issued.headers['cache-control'], 'no-store');

    const redirect = new URL(issued.body.redirect_url);
    assert.equal(`${redirect.origin}${redirect.pathname}`, 'https://client.example/sso/callback');
    assert.equal(redirect.searchParams.get('from'), 'auth', 'the callback query is kept');
    assert.equal(redirect.searchParams.get('token'), issued.body.token);

    const validated = await app.http.post('/api/sso/validate', { ...creds(client), token: issued.body.token });
    assert.equal(validated.status, 200, validated.text);
    assert.deepEqual(validated.body.user, { id: user.id, username: user.username, email: user.email });
    assert.equal(validated.body.valid, true);
    assert.match(validated.body.expires_at, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
    assert.equal(Number.isInteger(validated.body.user.id), true);
    // no-store answers are never revalidated, so none spends a hash of its body on an ETag
    assert.equal(issued.headers.etag, undefined);
    assert.equal(validated.headers.etag, undefined);
  });

  it('signs exactly the claims of SPEC 2.3 plus jti, verifiable by an independent JWT library', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app, { role: 'editor' });
    const issued = await app.http.post('/api/sso/token', { ...creds(client), username: user.username });
    const key = new TextEncoder().encode(app.config.JWT_SECRET);
    const { payload, protectedHeader } = await jose.jwtVerify(issued.body.token, key, {
      issuer: 'auth-service',
      audience: 'client_applications',
      algorithms: ['HS256'],
    });
    assert.equal(protectedHeader.alg, 'HS256');
    assert.deepEqual(Object.keys(payload).sort(), [
      'aud', 'client_id', 'client_name', 'exp', 'iat', 'ip_address', 'iss', 'jti', 'roles', 'user_id', 'username',
    ]);
    assert.equal(payload.user_id, String(user.id));
    assert.equal(payload.username, user.username);
    assert.equal(payload.client_id, client.client_id);
    assert.equal(payload.client_name, client.client_name);
    assert.deepEqual(payload.roles, ['editor']);
    assert.equal(payload.ip_address, '127.0.0.1');
    assert.equal((payload.exp as number) - (payload.iat as number), app.config.TOKEN_TTL_SECONDS);
  });

  it('binds the token to the end user IP the client names', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const issued = await app.http.post('/api/sso/token', { ...creds(client), username: user.username, ip_address: '203.0.113.9' });
    assert.equal(decode(issued.body.token).ip_address, '203.0.113.9');
    const wrongIp = await app.http.post('/api/sso/validate', { ...creds(client), token: issued.body.token, ip_address: '203.0.113.10' });
    assert.equal(wrongIp.status, 401);
    assert.equal(wrongIp.body.error, 'ip_mismatch');
    const rightIp = await app.http.post('/api/sso/validate', { ...creds(client), token: issued.body.token, ip_address: '203.0.113.9' });
    assert.equal(rightIp.status, 200);
  });

  it('rejects a token validated twice', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const { body } = await app.http.post('/api/sso/token', { ...creds(client), username: user.username });
    assert.equal((await app.http.post('/api/sso/validate', { ...creds(client), token: body.token })).status, 200);
    const second = await app.http.post('/api/sso/validate', { ...creds(client), token: body.token });
    assert.equal(second.status, 401);
    assert.deepEqual({ valid: second.body.valid, error: second.body.error }, { valid: false, error: 'token_already_used' });
  });

  it('of 50 concurrent validations of one token exactly one succeeds', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const { body } = await app.http.post('/api/sso/token', { ...creds(client), username: user.username });
    const results = await Promise.all(
      Array.from({ length: 50 }, () => app.http.post('/api/sso/validate', { ...creds(client), token: body.token })),
    );
    assert.equal(results.filter((r) => r.status === 200 && r.body.valid === true).length, 1);
    assert.equal(results.filter((r) => r.status === 401 && r.body.error === 'token_already_used').length, 49);
  });

  it('answers 404 user_not_found for an unknown and for an inactive user', async () => {
    const client = await makeClient(app);
    const inactive = await makeUser(app, { active: false });
    for (const username of ['nobody-here', inactive.username]) {
      const r = await app.http.post('/api/sso/token', { ...creds(client), username });
      assert.equal(r.status, 404);
      assert.equal(r.body.error, 'user_not_found');
    }
  });

  it('gives the same 401 for a wrong secret and an unknown client', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const wrong = await app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: 'nope', username: user.username });
    const unknown = await app.http.post('/api/sso/token', { client_id: 'no-such-client', client_secret: 'nope', username: user.username });
    assert.equal(wrong.status, 401);
    assert.deepEqual(wrong.body, unknown.body);
    assert.equal(wrong.body.error, 'invalid_client');
    const validate = await app.http.post('/api/sso/validate', { client_id: client.client_id, client_secret: 'nope', token: 'x' });
    assert.equal(validate.status, 401);
    assert.equal(validate.body.error, 'invalid_client');
  });

  it('finds the user whatever the case and spacing of the username', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const r = await app.http.post('/api/sso/token', { ...creds(client), username: ` ${user.username.toUpperCase()} ` });
    assert.equal(r.status, 200);
  });

  it('writes audit rows for issue and validation without the token', async () => {
    const client = await makeClient(app);
    const user = await makeUser(app);
    const { body } = await app.http.post('/api/sso/token', { ...creds(client), username: user.username });
    await app.http.post('/api/sso/validate', { ...creds(client), token: body.token });
    await app.http.post('/api/sso/validate', { ...creds(client), token: body.token });
    const rows = (await app.db.query<{ action: string; outcome: string; details: unknown }>(
      'SELECT action, outcome, details FROM audit_log WHERE client_id = $1 ORDER BY id', [client.client_id])).rows;
    assert.deepEqual(rows.map((r) => `${r.action}:${r.outcome}`), [
      'client.create:success', 'token.issue:success', 'token.validate:success', 'token.validate:failure',
    ]);
    const all = JSON.stringify(rows);
    assert.equal(all.includes(body.token), false);
    assert.equal(all.includes(body.token.split('.')[2]), false, 'no signature either');
    assert.equal(all.includes(client.client_secret), false);
  });
});

function creds(c: { client_id: string; client_secret: string }) {
  return { client_id: c.client_id, client_secret: c.client_secret };
}

function decode(token: string): Record<string, unknown> {
  return jose.decodeJwt(token);
}
