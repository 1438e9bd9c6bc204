import * as oidc from 'openid-client';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/db.ts';
import { openPostgres } from '../../src/db/postgres.ts';
import { browserMissing, newContext, releaseBrowser, sharedBrowser } from '../helpers/browser.ts';
import { createMigratedTestDatabase, onPostgres } from '../helpers/db.ts';
import { makeUser } from '../helpers/factories.ts';
import { fillSignIn, startIssuer, startReceiver } from './support.ts';

const CLI = { via: 'cli' as const, username: 'test' };

describe.skipIf(browserMissing || !onPostgres)('two instances on one PostgreSQL redeem one authorization code once', () => {
  let database: Awaited<ReturnType<typeof createMigratedTestDatabase>>;
  let secondPool: Db;
  let a: Awaited<ReturnType<typeof startIssuer>>;
  let b: Awaited<ReturnType<typeof startIssuer>>;
  let rp: Awaited<ReturnType<typeof startReceiver>>;
  let browser: Browser;
  beforeAll(async () => {
    database = await createMigratedTestDatabase();
    secondPool = openPostgres(database.url!);
    a = await startIssuer({}, { db: database.db, databaseUrl: database.url });
    b = await startIssuer({}, { db: secondPool, databaseUrl: database.url });
    rp = await startReceiver();
    browser = await sharedBrowser();
  });
  afterAll(async () => {
    await releaseBrowser(browser);
    await rp?.close();
    await a?.close();
    await b?.close();
    await secondPool?.close();
    await database?.drop();
  });

  it('gives tokens to one of two racing token requests, invalid_grant to the other', async () => {
    const { client, secret } = await a.app.services.clients.createClient({ name: 'Racer', callbackUrl: `${rp.origin}/cb`, allowedIps: ['127.0.0.1'] }, CLI);
    const user = await makeUser(a.app);
    for (let round = 0; round < 3; round++) {
      const config = await oidc.discovery(new URL(a.issuer), client.client_id, secret, undefined, { execute: [oidc.allowInsecureRequests] });
      const verifier = oidc.randomPKCECodeVerifier();
      const page = await (await newContext(browser)).newPage();
      await page.goto(oidc.buildAuthorizationUrl(config, {
        redirect_uri: `${rp.origin}/cb`, scope: 'openid', code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
      }).href);
      await fillSignIn(page, user.username, user.password);
      await page.waitForURL(`${rp.origin}/cb?**`);
      const code = new URL(page.url()).searchParams.get('code')!;
      await page.context().close();
      const redeem = (issuer: string) => fetch(`${issuer}/oidc/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: `${rp.origin}/cb`, code_verifier: verifier, client_id: client.client_id, client_secret: secret }),
      }).then(async (r) => ({ status: r.status, body: await r.json() as { error?: string } }));
      const answers = await Promise.all([redeem(a.issuer), redeem(b.issuer)]);
      expect(answers.map((x) => x.status).sort(), JSON.stringify(answers)).toEqual([200, 400]);
      expect(answers.find((x) => x.status === 400)!.body.error).toBe('invalid_grant');
    }
  });
});
