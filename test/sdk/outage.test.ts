import { describe, expect, it } from 'vitest';
// Through the package's own export map, as a client system imports it.
import { createSsoClient, SsoError } from '../../src/sdk/index.ts';
import { startTestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { startAppBehindProxy } from '../helpers/proxied-app.ts';

/** A fetch that counts the calls to each path and can act after each answer. */
function countingFetch(after?: (res: Response) => Promise<void>) {
  const calls = new Map<string, number>();
  const f: typeof fetch = async (input, init) => {
    const path = new URL(String(input)).pathname;
    calls.set(path, (calls.get(path) ?? 0) + 1);
    const res = await fetch(input, init);
    await after?.(res);
    return res;
  };
  return { fetch: f, calls };
}

describe('the client SDK during an outage', () => {
  it('retries token issue and logout on 503, never validation, and reports the outage as isUnavailable', async () => {
    const app = await startTestApp();
    try {
      const client = await makeClient(app);
      const user = await makeUser(app);
      const baseUrl = await app.listen();
      const counting = countingFetch();
      const sso = createSsoClient({ baseUrl, clientId: client.client_id, clientSecret: client.client_secret, fetch: counting.fetch, maxRetryDelayMs: 10 });
      const { token } = await sso.issueToken(user.username);
      counting.calls.clear();
      await app.db.close(); // the database is gone

      for (const [path, run] of [
        ['/api/sso/token', () => sso.issueToken(user.username)],
        ['/api/sso/logout', () => sso.logout(token)],
        ['/api/sso/validate', () => sso.validateToken(token)],
      ] as const) {
        const err = await run().then(() => null, (e: unknown) => e);
        expect(err, path).toBeInstanceOf(SsoError);
        const e = err as SsoError;
        expect(e.status).toBe(503);
        expect(e.code).toBe('service_unavailable');
        expect(e.isUnavailable).toBe(true);
        expect(e.isTokenRejection).toBe(false);
        expect(e.retryAfter).toBeGreaterThan(0);
      }
      expect(Object.fromEntries(counting.calls), 'issue and logout sent three times (two retries), validation once').toStrictEqual({
        '/api/sso/token': 3, '/api/sso/logout': 3, '/api/sso/validate': 1,
      });
    } finally {
      await app.close().catch(() => {});
    }
  });

  it.skipIf(!onPostgres && 'PostgreSQL only')('gets the token once PostgreSQL is back between two attempts', async () => {
    const { app, proxy, close } = await startAppBehindProxy();
    try {
      const client = await makeClient(app);
      const user = await makeUser(app);
      const baseUrl = await app.listen();
      // PostgreSQL comes back as soon as the first attempt has been answered 503
      const counting = countingFetch(async (res) => {
        if (res.status === 503) await proxy.restore();
      });
      const sso = createSsoClient({ baseUrl, clientId: client.client_id, clientSecret: client.client_secret, fetch: counting.fetch, maxRetryDelayMs: 50 });
      await proxy.cut();
      const issued = await sso.issueToken(user.username);
      expect(typeof issued.token).toBe('string');
      expect(counting.calls.get('/api/sso/token')).toBe(2);
      expect((await sso.validateToken(issued.token)).valid).toBe(true);
    } finally {
      await close();
    }
  });
});
