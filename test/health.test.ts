import { describe, expect, it } from 'vitest';
import { startTestApp } from './helpers/app.ts';

describe('health endpoints', () => {
  it('/healthz answers while the process runs; /readyz follows the database', async () => {
    const app = await startTestApp();
    try {
      const live = await app.http.get('/healthz');
      expect(live.status).toBe(200);
      expect(live.body.status).toBe('ok');
      const ready = await app.http.get('/readyz');
      expect(ready.status).toBe(200);
      expect(ready.body.database).toBe(process.env.TEST_DATABASE_URL ? 'postgres' : 'embedded');

      await app.db.close(); // the database goes away
      const notReady = await app.http.get('/readyz');
      expect(notReady.status).toBe(503);
      expect(notReady.body.error).toBe('not_ready');
      expect((await app.http.get('/healthz')).status, 'the process itself still answers').toBe(200);
    } finally {
      await app.close().catch(() => {});
    }
  });
});
