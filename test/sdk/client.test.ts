import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import * as jose from 'jose';
// Through the package's own export map, as a client system imports it.
import { createSsoClient, SsoError, verifyWebhook, WebhookVerificationError, type SsoClient } from 'auth-service/client';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';

describe('client SDK against a running service', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp({ RATE_LIMIT_VALIDATE_PER_MIN: '4' });
  });
  after(() => app.close());

  const sdkFor = async (extra: { fetch?: typeof fetch } = {}): Promise<{ sso: SsoClient; client: Awaited<ReturnType<typeof makeClient>> }> => {
    const client = await makeClient(app);
    return { sso: createSsoClient({ baseUrl: `${app.url}/`, clientId: client.client_id, clientSecret: client.client_secret, ...extra }), client };
  };

  it('issues a token bound to the end user IP and validates it once', async () => {
    const { sso, client } = await sdkFor();
    const user = await makeUser(app);
    const issued = await sso.issueToken(user.username, { ipAddress: '198.51.100.7' });
    assert.equal(typeof issued.token, 'string');
    assert.equal(new URL(issued.redirect_url).searchParams.get('token'), issued.token);
    assert.ok(issued.redirect_url.startsWith(client.callback_url.split('?')[0]));
    assert.equal(jose.decodeJwt(issued.token).ip_address, '198.51.100.7');

    const validated = await sso.validateToken(issued.token, { ipAddress: '198.51.100.7' });
    assert.deepEqual(validated.user, { id: user.id, username: user.username, email: user.email });
    assert.equal(validated.valid, true);
    assert.match(validated.expires_at, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);

    const again = await sso.validateToken(issued.token).catch((e: unknown) => e);
    assert.ok(again instanceof SsoError);
    assert.equal(again.status, 401);
    assert.equal(again.code, 'token_already_used');
    assert.equal(again.isTokenRejection, true);
  });

  it('refuses a token bound to another IP with ip_mismatch', async () => {
    const { sso } = await sdkFor();
    const user = await makeUser(app);
    const { token } = await sso.issueToken(user.username, { ipAddress: '198.51.100.7' });
    const err = await sso.validateToken(token, { ipAddress: '198.51.100.8' }).catch((e: unknown) => e);
    assert.ok(err instanceof SsoError);
    assert.equal(err.code, 'ip_mismatch');
  });

  it('raises typed errors for bad credentials and unknown users', async () => {
    const { client } = await sdkFor();
    const wrong = createSsoClient({ baseUrl: app.url, clientId: client.client_id, clientSecret: 'not-the-secret' });
    const err = await wrong.issueToken('anyone').catch((e: unknown) => e);
    assert.ok(err instanceof SsoError);
    assert.deepEqual([err.status, err.code, err.isTokenRejection], [401, 'invalid_client', false]);

    const { sso } = await sdkFor();
    const missing = await sso.issueToken('nobody-by-this-name').catch((e: unknown) => e);
    assert.ok(missing instanceof SsoError);
    assert.deepEqual([missing.status, missing.code], [404, 'user_not_found']);
  });

  it('logs a user out: their unused tokens for this client are revoked', async () => {
    const { sso } = await sdkFor();
    const user = await makeUser(app);
    const unused = await sso.issueToken(user.username);
    const current = await sso.issueToken(user.username);
    const result = await sso.logout(current.token);
    assert.equal(result.success, true);
    assert.ok(result.invalidated_tokens >= 1);
    const err = await sso.validateToken(unused.token).catch((e: unknown) => e);
    assert.ok(err instanceof SsoError);
    assert.equal(err.code, 'token_revoked');
  });

  it('reports rate limiting with retryAfter', async () => {
    const { sso } = await sdkFor();
    const codes: string[] = [];
    for (let i = 0; i < 5; i++) codes.push(await sso.validateToken('x.y.z').then(() => 'ok', (e: SsoError) => e.code));
    assert.deepEqual(codes, ['invalid_token', 'invalid_token', 'invalid_token', 'invalid_token', 'rate_limited']);
    const err = await sso.validateToken('x.y.z').catch((e: unknown) => e);
    assert.ok(err instanceof SsoError);
    assert.equal(err.status, 429);
    assert.ok(typeof err.retryAfter === 'number' && err.retryAfter > 0);
  });

  it('uses the fetch it is given and reports network failures as SsoError', async () => {
    const seen: string[] = [];
    const { sso } = await sdkFor({ fetch: (input, init) => (seen.push(String(input)), fetch(input, init)) });
    const user = await makeUser(app);
    await sso.issueToken(user.username);
    assert.deepEqual(seen, [`${app.url}/api/sso/token`]);

    const offline = createSsoClient({ baseUrl: 'http://127.0.0.1:1', clientId: 'c', clientSecret: 's' });
    const err = await offline.issueToken('x').catch((e: unknown) => e);
    assert.ok(err instanceof SsoError);
    assert.deepEqual([err.status, err.code], [0, 'network_error']);
  });

  it('re-exports verifyWebhook, which accepts a real delivery and refuses a tampered one', async () => {
    const secret = 'sdk-webhook-secret-0123456789';
    let got: { raw: string; headers: http.IncomingHttpHeaders } | undefined;
    const receiver = http.createServer((req, res) => {
      let raw = '';
      req.on('data', (c) => (raw += c));
      req.on('end', () => {
        got ??= { raw, headers: req.headers };
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    const hook = await app.db.query<{ id: number }>("INSERT INTO webhooks (url, events, secret) VALUES ($1, ARRAY['client.registered'], $2) RETURNING id", [url, secret]);
    try {
      const client = await makeClient(app);
      for (let i = 0; i < 500 && !got; i++) await new Promise((r) => setTimeout(r, 10));
      assert.ok(got, 'the delivery arrived');
      const event = verifyWebhook<{ client_id: string }>(got.raw, got.headers, secret);
      assert.equal(event.event, 'client.registered');
      assert.equal(event.data.client_id, client.client_id);

      const tampered = got.raw.replace(client.client_id, 'someone-else');
      assert.throws(() => verifyWebhook(tampered, got!.headers, secret), (e: unknown) => e instanceof WebhookVerificationError && e.reason === 'signature_mismatch');
      const old = JSON.stringify({ event: 'x', timestamp: new Date(Date.now() - 3_600_000).toISOString(), data: {} });
      const oldSig = createHmac('sha256', secret).update(old).digest('hex');
      assert.throws(() => verifyWebhook(old, { 'x-auth-signature': oldSig }, secret), (e: unknown) => e instanceof WebhookVerificationError && e.reason === 'timestamp_out_of_tolerance');
    } finally {
      await app.db.query('DELETE FROM webhooks WHERE id = $1', [hook.rows[0].id]);
      await new Promise((resolve) => receiver.close(resolve));
    }
  });
});
