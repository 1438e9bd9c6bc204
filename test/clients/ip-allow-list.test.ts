import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';

/** The allow list over HTTP; 127.0.0.2 and 127.0.0.3 act as two callers on loopback. */
describe('IP allow list on the token endpoints', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(() => app.close());

  async function tokenFrom(localAddress: string, client: Awaited<ReturnType<typeof makeClient>>, username: string, headers: Record<string, string> = {}, target = app) {
    return target.http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username }, { localAddress, headers });
  }

  it('admits an address inside an allowed CIDR range and refuses one outside with 403', async () => {
    const client = await makeClient(app, { allowedIps: ['127.0.0.2/31'] });
    const user = await makeUser(app);
    assert.equal((await tokenFrom('127.0.0.2', client, user.username)).status, 200);
    assert.equal((await tokenFrom('127.0.0.3', client, user.username)).status, 200);
    const outside = await tokenFrom('127.0.0.1', client, user.username);
    assert.equal(outside.status, 403);
    assert.equal(outside.body.error, 'ip_not_allowed');
  });

  it('tells two single addresses apart', async () => {
    const client = await makeClient(app, { allowedIps: ['127.0.0.2'] });
    const user = await makeUser(app);
    assert.equal((await tokenFrom('127.0.0.2', client, user.username)).status, 200);
    assert.equal((await tokenFrom('127.0.0.3', client, user.username)).status, 403);
  });

  it('ignores a forged X-Forwarded-For when TRUST_PROXY is unset', async () => {
    const client = await makeClient(app, { allowedIps: ['127.0.0.2'] });
    const user = await makeUser(app);
    const forged = await tokenFrom('127.0.0.3', client, user.username, { 'X-Forwarded-For': '127.0.0.2' });
    assert.equal(forged.status, 403);
  });

  it('believes X-Forwarded-For from a proxy TRUST_PROXY names', async () => {
    const proxied = await startTestApp({ TRUST_PROXY: '127.0.0.3' });
    try {
      const client = await makeClient(proxied, { allowedIps: ['198.51.100.0/24'] });
      const user = await makeUser(proxied);
      const viaProxy = await tokenFrom('127.0.0.3', client, user.username, { 'X-Forwarded-For': '198.51.100.7' }, proxied);
      assert.equal(viaProxy.status, 200, viaProxy.text);
      const notProxy = await tokenFrom('127.0.0.2', client, user.username, { 'X-Forwarded-For': '198.51.100.7' }, proxied);
      assert.equal(notProxy.status, 403);
    } finally {
      await proxied.close();
    }
  });

  it('refuses every caller of a client with an empty allow list', async () => {
    const client = await makeClient(app, { allowedIps: [] });
    const user = await makeUser(app);
    assert.equal((await tokenFrom('127.0.0.1', client, user.username)).status, 403);
  });

  it('applies the allow list to the legacy validate route but not to /api/sso/validate', async () => {
    const client = await makeClient(app, { allowedIps: ['127.0.0.2'] });
    const user = await makeUser(app);
    const token1 = (await tokenFrom('127.0.0.2', client, user.username)).body.token;
    const token2 = (await tokenFrom('127.0.0.2', client, user.username)).body.token;
    const creds = { client_id: client.client_id, client_secret: client.client_secret };
    const legacy = await app.http.post('/api/validate-token', { ...creds, token: token1 }, { localAddress: '127.0.0.3' });
    assert.equal(legacy.status, 403);
    const modern = await app.http.post('/api/sso/validate', { ...creds, token: token2 }, { localAddress: '127.0.0.3' });
    assert.equal(modern.status, 200);
  });

  it('checks credentials before the address, so an unknown client learns nothing from a 403', async () => {
    const user = await makeUser(app);
    const r = await app.http.post('/api/sso/token', { client_id: 'unknown', client_secret: 'x', username: user.username }, { localAddress: '127.0.0.3' });
    assert.equal(r.status, 401);
  });

  it('refuses malformed entries when they are saved, naming them', async () => {
    const client = await makeClient(app);
    await assert.rejects(
      app.services.clients.updateClient(client.client_id, { allowedIps: ['10.0.0.1', '10.0.0.0/33', 'example.com'] }, { via: 'cli' }),
      (err: Error & { code?: string }) => err.code === 'invalid_allowed_ips' && /10\.0\.0\.0\/33/.test(err.message) && /example\.com/.test(err.message),
    );
    await assert.rejects(
      app.services.clients.updateClient(client.client_id, { allowedIps: ['0.0.0.0/0'] }, { via: 'cli' }),
      (err: Error & { code?: string }) => err.code === 'allow_everything_unconfirmed',
    );
  });
});

describe('callback URLs', () => {
  it('must be https in production, except on loopback', async () => {
    const prod = await startTestApp({ NODE_ENV: 'production' });
    try {
      const create = (callbackUrl: string) => prod.services.clients.createClient({ name: 'Cb', callbackUrl }, { via: 'cli' });
      await assert.rejects(create('http://shop.example/cb'), (err: Error & { code?: string }) => err.code === 'invalid_callback_url');
      assert.equal((await create('https://shop.example/cb')).client.callback_url, 'https://shop.example/cb');
      assert.equal((await create('http://127.0.0.1:4000/cb')).client.callback_url, 'http://127.0.0.1:4000/cb');
    } finally {
      await prod.close();
    }
    const dev = await startTestApp();
    try {
      const { client } = await dev.services.clients.createClient({ name: 'Cb', callbackUrl: 'http://shop.example/cb' }, { via: 'cli' });
      assert.equal(client.callback_url, 'http://shop.example/cb', 'http is fine outside production');
      await assert.rejects(dev.services.clients.createClient({ name: 'Cb', callbackUrl: 'javascript:alert(1)' }, { via: 'cli' }));
      await assert.rejects(dev.services.clients.createClient({ name: 'Cb', callbackUrl: 'https://u:p@shop.example/cb' }, { via: 'cli' }));
    } finally {
      await dev.close();
    }
  });
});
