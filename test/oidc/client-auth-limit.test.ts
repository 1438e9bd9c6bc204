import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/http.ts';
import { startIssuer } from './support.ts';

const CLI = { via: 'cli' as const, username: 'test' };
const LIMIT = 3;

/**
 * Wrong client secrets at the provider's token, introspection and revocation endpoints count
 * toward the failure limit of the spec's own endpoints (per address and client id): past it,
 * the failures of that address at that client are 429 with Retry-After; the right secret is
 * still served, and another client is not affected.
 */
describe('OpenID Connect: the limit on failed client authentications', () => {
  let service: Awaited<ReturnType<typeof startIssuer>>;
  let shop: { id: string; secret: string };
  let other: { id: string; secret: string };
  beforeAll(async () => {
    service = await startIssuer({ RATE_LIMIT_CLIENT_AUTH_FAILURES_PER_MIN: String(LIMIT) });
    const create = async (name: string) => {
      const created = await service.app.services.clients.createClient({ name, callbackUrl: 'https://rp.example/cb', allowedIps: ['127.0.0.1', '::1'] }, CLI);
      return { id: created.client.client_id, secret: created.secret };
    };
    shop = await create('Shop');
    other = await create('Other');
  });
  afterAll(() => service?.close());

  const post = (path: string, body: Record<string, string>, authorization?: string) => fetch(`${service.issuer}/oidc${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(authorization ? { authorization } : {}) },
    body: new URLSearchParams(body),
  });

  it('answers 429 with Retry-After past the limit, at every endpoint, and still serves the right secret', async () => {
    const wrong = basicAuth(shop.id, 'not-the-secret');
    for (let i = 0; i < LIMIT; i++) {
      const res = await post('/token/introspection', { token: 'x' }, wrong);
      expect(res.status, `failure ${i + 1}`).toBe(401);
      expect(((await res.json()) as { error: string }).error).toBe('invalid_client');
    }
    const refused = await post('/token/introspection', { token: 'x' }, wrong);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(refused.headers.get('www-authenticate')).toBeNull();
    const body = (await refused.json()) as { error: string; retry_after: number };
    expect(body.error).toBe('rate_limited');
    expect(body.retry_after).toBeGreaterThan(0);

    // the same address and client at the token endpoint, the secret in the body this time
    const token = await post('/token', { grant_type: 'refresh_token', refresh_token: 'x', client_id: shop.id, client_secret: 'still-wrong' });
    expect(token.status).toBe(429);
    expect((await post('/token/revocation', { token: 'x' }, wrong)).status).toBe(429);

    // the right secret is never refused by the failure limit
    const right = await post('/token/introspection', { token: 'x' }, basicAuth(shop.id, shop.secret));
    expect(right.status).toBe(200);
    expect(((await right.json()) as { active: boolean }).active).toBe(false);
  });

  it('counts per client: another client from the same address is not refused', async () => {
    const res = await post('/token/introspection', { token: 'x' }, basicAuth(other.id, 'not-the-secret'));
    expect(res.status).toBe(401);
  });

  it('audits the refusal', async () => {
    const { rows } = await service.app.db.query<{ details: { refused?: string; route?: string } }>(
      `SELECT details FROM audit_log WHERE action = 'oidc.client_auth' AND client_id = $1 AND outcome = 'failure' ORDER BY id`, [shop.id],
    );
    expect(rows.filter((r) => r.details.refused === 'rate_limited').map((r) => r.details.route)).toStrictEqual(['introspection', 'token', 'revocation']);
    expect(rows.filter((r) => r.details.refused === undefined)).toHaveLength(LIMIT);
  });
});
