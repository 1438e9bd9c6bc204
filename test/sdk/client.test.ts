import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rejectionOf, thrownBy } from '../helpers/expect.ts';
import * as jose from 'jose';
// Through the package's own export map, as a client system imports it.
import { createSsoClient, SsoError, verifyWebhook, WebhookVerificationError, type SsoClient } from '../../src/sdk/index.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';

describe('client SDK against a running service', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ RATE_LIMIT_VALIDATE_PER_MIN: '4' });
  });
  afterAll(() => app.close());

  const sdkFor = async (extra: { fetch?: typeof fetch } = {}): Promise<{ sso: SsoClient; client: Awaited<ReturnType<typeof makeClient>> }> => {
    const client = await makeClient(app);
    return { sso: createSsoClient({ baseUrl: `${await app.listen()}/`, clientId: client.client_id, clientSecret: client.client_secret, ...extra }), client };
  };

  it('issues a token bound to the end user IP and validates it once', async () => {
    const { sso, client } = await sdkFor();
    const user = await makeUser(app);
    const issued = await sso.issueToken(user.username, { ipAddress: '198.51.100.7' });
    expect(typeof issued.token).toBe('string');
    expect(new URL(issued.redirect_url).searchParams.get('token')).toBe(issued.token);
    expect(issued.redirect_url.startsWith(client.callback_url.split('?')[0])).toBeTruthy();
    expect(jose.decodeJwt(issued.token).ip_address).toBe('198.51.100.7');

    const validated = await sso.validateToken(issued.token, { ipAddress: '198.51.100.7' });
    expect(validated.user).toStrictEqual({ id: user.id, username: user.username, email: user.email, roles: [user.role], full_name: user.full_name });
    expect(validated.valid).toBe(true);
    expect(validated.expires_at).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);

    const again = await rejectionOf(sso.validateToken(issued.token), SsoError);
    expect(again).toBeInstanceOf(SsoError);
    expect(again.status).toBe(401);
    expect(again.code).toBe('token_already_used');
    expect(again.isTokenRejection).toBe(true);
  });

  it('refuses a token bound to another IP with ip_mismatch', async () => {
    const { sso } = await sdkFor();
    const user = await makeUser(app);
    const { token } = await sso.issueToken(user.username, { ipAddress: '198.51.100.7' });
    const err = await rejectionOf(sso.validateToken(token, { ipAddress: '198.51.100.8' }), SsoError);
    expect(err).toBeInstanceOf(SsoError);
    expect(err.code).toBe('ip_mismatch');
  });

  it('raises typed errors for bad credentials and unknown users', async () => {
    const { client } = await sdkFor();
    const wrong = createSsoClient({ baseUrl: (await app.listen()), clientId: client.client_id, clientSecret: 'not-the-secret' });
    const err = await rejectionOf(wrong.issueToken('anyone'), SsoError);
    expect(err).toBeInstanceOf(SsoError);
    expect([err.status, err.code, err.isTokenRejection]).toStrictEqual([401, 'invalid_client', false]);

    const { sso } = await sdkFor();
    const missing = await rejectionOf(sso.issueToken('nobody-by-this-name'), SsoError);
    expect(missing).toBeInstanceOf(SsoError);
    expect([missing.status, missing.code]).toStrictEqual([404, 'user_not_found']);
  });

  it('logs a user out: their unused tokens for this client are revoked', async () => {
    const { sso } = await sdkFor();
    const user = await makeUser(app);
    const unused = await sso.issueToken(user.username);
    const current = await sso.issueToken(user.username);
    const result = await sso.logout(current.token);
    expect(result.success).toBe(true);
    expect(result.invalidated_tokens >= 1).toBeTruthy();
    const err = await rejectionOf(sso.validateToken(unused.token), SsoError);
    expect(err).toBeInstanceOf(SsoError);
    expect(err.code).toBe('token_revoked');
  });

  it('reports rate limiting with retryAfter', async () => {
    const { sso } = await sdkFor();
    const codes: string[] = [];
    for (let i = 0; i < 5; i++) codes.push(await sso.validateToken('x.y.z').then(() => 'ok', (e: SsoError) => e.code));
    expect(codes).toStrictEqual(['invalid_token', 'invalid_token', 'invalid_token', 'invalid_token', 'rate_limited']);
    const err = await rejectionOf(sso.validateToken('x.y.z'), SsoError);
    expect(err).toBeInstanceOf(SsoError);
    expect(err.status).toBe(429);
    expect(typeof err.retryAfter === 'number' && err.retryAfter > 0).toBeTruthy();
  });

  it('uses the fetch it is given and reports network failures as SsoError', async () => {
    const seen: string[] = [];
    const { sso } = await sdkFor({ fetch: (input, init) => (seen.push(String(input)), fetch(input, init)) });
    const user = await makeUser(app);
    await sso.issueToken(user.username);
    expect(seen).toStrictEqual([`${await app.listen()}/api/sso/token`]);

    const offline = createSsoClient({ baseUrl: 'http://127.0.0.1:1', clientId: 'c', clientSecret: 's' });
    const err = await rejectionOf(offline.issueToken('x'), SsoError);
    expect(err).toBeInstanceOf(SsoError);
    expect([err.status, err.code]).toStrictEqual([0, 'network_error']);
  });

  it('reports an answer whose body stalls or breaks off as SsoError timeout or network_error', async () => {
    // headers at once, then part of a body that never ends; or the connection dropped mid-body
    const server = http.createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"token":');
      if (req.url?.startsWith('/drop/')) setTimeout(() => res.destroy(), 10);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const stalled = createSsoClient({ baseUrl: `${base}/stall`, clientId: 'c', clientSecret: 's', timeoutMs: 200 });
      const timedOut = await rejectionOf(stalled.issueToken('x'), SsoError);
      expect([timedOut.status, timedOut.code]).toStrictEqual([0, 'timeout']);
      const dropped = createSsoClient({ baseUrl: `${base}/drop`, clientId: 'c', clientSecret: 's' });
      const broken = await rejectionOf(dropped.validateToken('x.y.z'), SsoError);
      expect([broken.status, broken.code]).toStrictEqual([0, 'network_error']);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
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
      expect(got, 'the delivery arrived').toBeTruthy();
      const delivery = got!;
      const event = verifyWebhook<{ client_id: string }>(delivery.raw, delivery.headers, secret);
      expect(event.event).toBe('client.registered');
      expect(event.data.client_id).toBe(client.client_id);

      const tampered = delivery.raw.replace(client.client_id, 'someone-else');
      expect(thrownBy(() => verifyWebhook(tampered, delivery.headers, secret))).toSatisfy((e: unknown) => e instanceof WebhookVerificationError && e.reason === 'signature_mismatch');
      const old = JSON.stringify({ event: 'x', timestamp: new Date(Date.now() - 3_600_000).toISOString(), data: {} });
      const oldSig = createHmac('sha256', secret).update(old).digest('hex');
      expect(thrownBy(() => verifyWebhook(old, { 'x-auth-signature': oldSig }, secret))).toSatisfy((e: unknown) => e instanceof WebhookVerificationError && e.reason === 'timestamp_out_of_tolerance');
    } finally {
      await app.db.query('DELETE FROM webhooks WHERE id = $1', [hook.rows[0].id]);
      await new Promise((resolve) => receiver.close(resolve));
    }
  });
});
