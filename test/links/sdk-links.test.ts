import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// Through the package's own export map, as a client system imports it.
import { createSsoClient, SsoError } from '../../src/sdk/index.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { claimsOf, dashboardUser } from './support.ts';

describe('client SDK: confirming dashboard links', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app.close());

  it('confirms a link in a few lines: validate the dashboard token, check the local sign-in, confirmLink', async () => {
    const client = await makeClient(app, { name: 'SDK Shop' });
    const sso = createSsoClient({ baseUrl: await app.listen(), clientId: client.client_id, clientSecret: client.client_secret });
    const user = await makeUser(app);
    const dashboard = await dashboardUser(app, user.username, user.password);
    await dashboard.link(client.client_id, 'Shop.Person');

    expect(await sso.pendingLinks()).toStrictEqual([
      { user_id: user.id, account_username: user.username, external_username: 'Shop.Person', requested_at: expect.any(String) },
    ]);
    // the client system's side: the user arrives with a dashboard token naming their account...
    const { user: arriving } = await sso.validateToken(await dashboard.signIn(client.client_id));
    expect(arriving.username).toBe(user.username);
    // ...signs in once with the client's own password as shop.person, and the client says so
    const wrong = await sso.confirmLink(arriving.id, 'another.person').catch((e: unknown) => e);
    expect(wrong instanceof SsoError).toBe(true);
    expect([(wrong as SsoError).status, (wrong as SsoError).code]).toStrictEqual([404, 'link_not_found']);
    const link = await sso.confirmLink(arriving.id, 'shop.person');
    expect(link).toMatchObject({ user_id: user.id, client_id: client.client_id, external_username: 'shop.person', status: 'active', confirmed_by: 'client' });

    expect(await sso.pendingLinks()).toStrictEqual([]);
    expect(claimsOf(await dashboard.signIn(client.client_id)).username).toBe('shop.person');
  });

  it('cannot confirm with another client\'s credentials', async () => {
    const shop = await makeClient(app);
    const other = await makeClient(app);
    const user = await makeUser(app);
    const dashboard = await dashboardUser(app, user.username, user.password);
    await dashboard.link(shop.client_id, 'only.at.shop');
    const intruder = createSsoClient({ baseUrl: await app.listen(), clientId: other.client_id, clientSecret: other.client_secret });
    const err = await intruder.confirmLink(user.id, 'only.at.shop').catch((e: unknown) => e);
    expect((err as SsoError).code).toBe('link_not_found');
    expect(claimsOf(await dashboard.signIn(shop.client_id)).username).toBe(user.username);
  });
});
