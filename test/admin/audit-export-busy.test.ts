import http from 'node:http';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_EXPORTS } from '../../src/audit/service.ts';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { makeUser } from '../helpers/factories.ts';
import { signedIn } from './support.ts';

/**
 * A PostgreSQL audit export holds one connection for its whole download (one snapshot). Downloads
 * whose receivers stop reading must not take the pool every other request needs: at most
 * MAX_EXPORTS run at once on an instance, the others are refused before anything is written.
 */
describe('audit exports whose receivers stopped reading', () => {
  let app: TestApp;
  beforeAll(async () => { app = await startTestApp(); });
  afterAll(() => app?.close());

  it(`run ${MAX_EXPORTS} at a time; the others are told to come back, and sign-ins go on working`, async () => {
    const action = unique('test.export.pool.');
    await app.db.query(
      `INSERT INTO audit_log (action, outcome, username, user_agent, details)
       SELECT $1, 'success', 'user' || g, 'agent ' || repeat('x', 200) || g, jsonb_build_object('n', g) FROM generate_series(1, 20000) AS g`,
      [action],
    );
    const admin = await signedIn(app, 'admin');
    const user = await makeUser(app);
    const base = await app.listen();
    const requests: http.ClientRequest[] = [];
    const answers = await Promise.all(Array.from({ length: 20 }, () => new Promise<{ status: number; retryAfter: unknown; disposition: unknown }>((resolve, reject) => {
      const req = http.get(`${base}/api/admin/audit?format=ndjson&action=${action}`, { headers: { cookie: admin.cookie } }, (res) => {
        res.pause(); // read the headers, then stop reading
        resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'], disposition: res.headers['content-disposition'] });
      });
      req.on('error', () => {});
      req.setTimeout(60_000, () => reject(new Error('no answer')));
      requests.push(req);
    })));
    try {
      const running = answers.filter((a) => a.status === 200);
      const refused = answers.filter((a) => a.status === 429);
      expect([running.length, refused.length]).toStrictEqual([MAX_EXPORTS, 20 - MAX_EXPORTS]);
      expect(refused[0]).toMatchObject({ retryAfter: '10', disposition: undefined });
      if (onPostgres) {
        // looked at over a connection of its own
        const own = new pg.Client({ connectionString: app.databaseUrl });
        await own.connect();
        const idle = (await own.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
        )).rows[0].n;
        await own.end();
        expect(idle, 'connections held by the stalled exports').toBeLessThanOrEqual(MAX_EXPORTS);
      }
      const login = await app.http.post('/api/auth/login', { login: user.username, password: user.password });
      expect(login.status, login.text).toBe(200);
      const audited = await app.db.query("SELECT 1 FROM audit_log WHERE action = 'audit.export' AND details->'filter'->>'action' = $1", [action]);
      expect(audited.rowCount, 'only the exports that ran are audited').toBe(MAX_EXPORTS);
    } finally {
      for (const req of requests) req.destroy();
    }
  }, 90_000);
});
