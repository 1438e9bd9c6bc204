import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startTestApp } from './helpers/app.ts';

describe('health endpoints', () => {
  it('/healthz answers while the process runs; /readyz follows the database', async () => {
    const app = await startTestApp();
    try {
      const live = await app.http.get('/healthz');
      assert.equal(live.status, 200);
      assert.equal(live.body.status, 'ok');
      const ready = await app.http.get('/readyz');
      assert.equal(ready.status, 200);
      assert.equal(ready.body.database, process.env.TEST_DATABASE_URL ? 'postgres' : 'embedded');

      await app.db.close(); // the database goes away
      const notReady = await app.http.get('/readyz');
      assert.equal(notReady.status, 503);
      assert.equal(notReady.body.error, 'not_ready');
      assert.equal((await app.http.get('/healthz')).status, 200, 'the process itself still answers');
    } finally {
      await app.close().catch(() => {});
    }
  });
});
