import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { holdLocks } from '../helpers/locks.ts';

/*
 * sso_tokens has no foreign keys (migrations/0021), and the server-to-server issue reads its
 * client without a lock: a token issued while a transaction renames or deletes that client is
 * written under the old id. A client registered later under that id must neither validate it nor
 * sign its user out with it: a token keeps the creation time of the client it was issued to.
 * (Found by a review helper.)
 */
describe('a server-to-server token issued while its client id is being renamed or deleted', () => {
  let app: TestApp;
  beforeAll(async () => { app = await startTestApp(); });
  afterAll(() => app?.close());

  for (const change of ['renamed', 'deleted'] as const) {
    it.runIf(onPostgres)(`is not accepted by a client registered again under the id it was ${change} from`, async () => {
      const user = await makeUser(app);
      const client = await makeClient(app);
      const statement = change === 'renamed' ? 'UPDATE clients SET client_id = $1 WHERE client_id = $2' : 'DELETE FROM clients WHERE client_id = $2 AND $1::text IS NOT NULL';
      const release = await holdLocks(app.db, statement, [unique('renamed-').toLowerCase(), client.client_id]);
      const issued = await app.http.post('/api/sso/token', { client_id: client.client_id, client_secret: client.client_secret, username: user.username }, { localAddress: '127.0.0.1' });
      await release();
      expect(issued.status, issued.text).toBe(200);
      const { secret } = await app.services.clients.createClient(
        { name: 'Another system', callbackUrl: 'https://other.example/cb', allowedIps: ['127.0.0.1', '::1'], clientId: client.client_id }, { via: 'cli', username: 'test' });
      const newcomer = { client_id: client.client_id, client_secret: secret };
      const loggedOut = await app.http.post('/api/sso/logout', { ...newcomer, token: issued.body.token }, { localAddress: '127.0.0.1' });
      expect([loggedOut.status, loggedOut.body.error], 'no sign-out with it').toStrictEqual([401, 'invalid_token']);
      const validated = await app.http.post('/api/sso/validate', { ...newcomer, token: issued.body.token }, { localAddress: '127.0.0.1' });
      expect([validated.status, validated.body.error], 'no validation').toStrictEqual([401, 'invalid_token']);
      // a token of the newcomer itself works
      const own = await app.http.post('/api/sso/token', { ...newcomer, username: user.username }, { localAddress: '127.0.0.1' });
      expect((await app.http.post('/api/sso/validate', { ...newcomer, token: own.body.token }, { localAddress: '127.0.0.1' })).body.valid).toBe(true);
    });
  }
});
