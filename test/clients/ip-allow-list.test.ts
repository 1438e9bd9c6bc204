import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';

/** The allow list over HTTP; 127.0.0.2 and 127.0.0.3 act as two callers on loopback. */
describe('IP allow list on the token endpoints', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  async function tokenFrom(localAddress: string, client: Awaited<ReturnType<typeof makeClient>>, username: string, headers: Record<string, string> = {}, target = app) {
    return target.http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username }, { localAddress, headers });
  }

  it('admits an address inside an allowed CIDR range and refuses one outside with 403', async () => {
    const client = await makeClient(app, { allowedIps: ['127.0.0.2/31'] });
    const user = await makeUser(app);
    expect((await tokenFrom('127.0.0.2', client, user.username)).status).toBe(200);
    expect((await tokenFrom('127.0.0.3', client, user.username)).status).toBe(200);
    const outside = await tokenFrom('127.0.0.1', client, user.username);
    expect(outside.status).toBe(403);
    expect(outside.body.error).toBe('ip_not_allowed');
  });

  it('admits an IPv4 caller by an IPv6 range that holds the IPv4-mapped space, as a dual-stack socket shows it', async () => {
    const client = await makeClient(app, { allowedIps: ['::/64'] });
    const user = await makeUser(app);
    expect((await tokenFrom('127.0.0.2', client, user.username)).status).toBe(200);
    expect((await tokenFrom('127.0.0.2', await makeClient(app, { allowedIps: ['2001:db8::/32'] }), user.username)).status).toBe(403);
  });

  it('tells two single addresses apart', async () => {
    const client = await makeClient(app, { allowedIps: ['127.0.0.2'] });
    const user = await makeUser(app);
    expect((await tokenFrom('127.0.0.2', client, user.username)).status).toBe(200);
    expect((await tokenFrom('127.0.0.3', client, user.username)).status).toBe(403);
  });

  it('ignores a forged X-Forwarded-For when TRUST_PROXY is unset', async () => {
    const client = await makeClient(app, { allowedIps: ['127.0.0.2'] });
    const user = await makeUser(app);
    const forged = await tokenFrom('127.0.0.3', client, user.username, { 'X-Forwarded-For': '127.0.0.2' });
    expect(forged.status).toBe(403);
  });

  it('believes X-Forwarded-For from a proxy TRUST_PROXY names', async () => {
    const proxied = await startTestApp({ TRUST_PROXY: '127.0.0.3' });
    try {
      const client = await makeClient(proxied, { allowedIps: ['198.51.100.0/24'] });
      const user = await makeUser(proxied);
      const viaProxy = await tokenFrom('127.0.0.3', client, user.username, { 'X-Forwarded-For': '198.51.100.7' }, proxied);
      expect(viaProxy.status, viaProxy.text).toBe(200);
      const notProxy = await tokenFrom('127.0.0.2', client, user.username, { 'X-Forwarded-For': '198.51.100.7' }, proxied);
      expect(notProxy.status).toBe(403);
    } finally {
      await proxied.close();
    }
  });

  it('refuses every caller of a client with an empty allow list', async () => {
    const client = await makeClient(app, { allowedIps: [] });
    const user = await makeUser(app);
    expect((await tokenFrom('127.0.0.1', client, user.username)).status).toBe(403);
  });

  it('applies the allow list to the legacy validate route but not to /api/sso/validate', async () => {
    const client = await makeClient(app, { allowedIps: ['127.0.0.2'] });
    const user = await makeUser(app);
    const token1 = (await tokenFrom('127.0.0.2', client, user.username)).body.token;
    const token2 = (await tokenFrom('127.0.0.2', client, user.username)).body.token;
    const creds = { client_id: client.client_id, client_secret: client.client_secret };
    const legacy = await app.http.post('/api/validate-token', { ...creds, token: token1 }, { localAddress: '127.0.0.3' });
    expect(legacy.status).toBe(403);
    const modern = await app.http.post('/api/sso/validate', { ...creds, token: token2 }, { localAddress: '127.0.0.3' });
    expect(modern.status).toBe(200);
  });

  it('checks credentials before the address, so an unknown client learns nothing from a 403', async () => {
    const user = await makeUser(app);
    const r = await app.http.post('/api/sso/token', { client_id: 'unknown', client_secret: 'x', username: user.username }, { localAddress: '127.0.0.3' });
    expect(r.status).toBe(401);
  });

  it('refuses malformed entries when they are saved, naming them', async () => {
    const client = await makeClient(app);
    await expect(app.services.clients.updateClient(client.client_id, { allowedIps: ['10.0.0.1', '10.0.0.0/33', 'example.com'] }, { via: 'cli' })).rejects.toSatisfy((err: Error & { code?: string }) => err.code === 'invalid_allowed_ips' && /10\.0\.0\.0\/33/.test(err.message) && /example\.com/.test(err.message));
    await expect(app.services.clients.updateClient(client.client_id, { allowedIps: ['0.0.0.0/0'] }, { via: 'cli' })).rejects.toSatisfy((err: Error & { code?: string }) => err.code === 'allow_everything_unconfirmed');
  });
});

describe('callback URLs', () => {
  it('must be https in production, except on loopback', async () => {
    const prod = await startTestApp({ NODE_ENV: 'production', BCRYPT_COST: '10' });
    try {
      const create = (callbackUrl: string) => prod.services.clients.createClient({ name: 'Cb', callbackUrl }, { via: 'cli' });
      await expect(create('http://shop.example/cb')).rejects.toSatisfy((err: Error & { code?: string }) => err.code === 'invalid_callback_url');
      expect((await create('https://shop.example/cb')).client.callback_url).toBe('https://shop.example/cb');
      expect((await create('http://127.0.0.1:4000/cb')).client.callback_url).toBe('http://127.0.0.1:4000/cb');
    } finally {
      await prod.close();
    }
    const dev = await startTestApp();
    try {
      const { client } = await dev.services.clients.createClient({ name: 'Cb', callbackUrl: 'http://shop.example/cb' }, { via: 'cli' });
      expect(client.callback_url, 'http is fine outside production').toBe('http://shop.example/cb');
      await expect(dev.services.clients.createClient({ name: 'Cb', callbackUrl: 'javascript:alert(1)' }, { via: 'cli' })).rejects.toThrow();
      await expect(dev.services.clients.createClient({ name: 'Cb', callbackUrl: 'https://u:p@shop.example/cb' }, { via: 'cli' })).rejects.toThrow();
    } finally {
      await dev.close();
    }
  });
});
