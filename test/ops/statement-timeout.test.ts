import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { migrate } from '../../src/db/migrate.ts';
import { openPostgres } from '../../src/db/postgres.ts';
import type { TestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { startAppBehindProxy } from '../helpers/proxied-app.ts';
import type { TcpProxy } from '../helpers/tcp-proxy.ts';

type Fixture = { client: Awaited<ReturnType<typeof makeClient>>; user: Awaited<ReturnType<typeof makeUser>> };
const creds = (c: Fixture['client']) => ({ client_id: c.client_id, client_secret: c.client_secret });

function expectUnavailable(r: { status: number; text: string; body: { error?: string }; headers: Record<string, string | string[] | undefined> }, what: string) {
  expect(r.status, `${what}: ${r.text}`).toBe(503);
  expect(r.body.error, what).toBe('service_unavailable');
  expect(Number(r.headers['retry-after']), `${what} carries Retry-After`).toBeGreaterThan(0);
}

describe('DATABASE_STATEMENT_TIMEOUT', () => {
  it('is a duration of at least a second, 10s unless set, 0 for none', () => {
    expect(loadConfig({}).DATABASE_STATEMENT_TIMEOUT).toBe(10_000);
    expect(loadConfig({ DATABASE_STATEMENT_TIMEOUT: '2m' }).DATABASE_STATEMENT_TIMEOUT).toBe(120_000);
    expect(loadConfig({ DATABASE_STATEMENT_TIMEOUT: '0' }).DATABASE_STATEMENT_TIMEOUT).toBe(0);
    expect(() => loadConfig({ DATABASE_STATEMENT_TIMEOUT: '500' })).toThrow(/DATABASE_STATEMENT_TIMEOUT/);
    expect(() => loadConfig({ DATABASE_STATEMENT_TIMEOUT: '2h' })).toThrow(/DATABASE_STATEMENT_TIMEOUT/);
  });
});

describe.skipIf(!onPostgres && 'PostgreSQL only')('a statement bounded by DATABASE_STATEMENT_TIMEOUT', () => {
  let app: TestApp;
  let proxy: TcpProxy;
  let url: string;
  let close: () => Promise<void>;
  let f: Fixture;
  beforeAll(async () => {
    // the service reaches PostgreSQL through the proxy, with a bound of one second
    ({ app, proxy, url, close } = await startAppBehindProxy({ DATABASE_STATEMENT_TIMEOUT: '1s' }, { pool: { statementTimeoutMs: 1000, connectTimeoutMs: 1000 } }));
    f = { client: await makeClient(app), user: await makeUser(app) };
  });
  afterAll(() => close());

  /** A session of an operator's holding `sql`'s lock until `release()`. */
  async function holdLock(sql: string): Promise<{ release(): Promise<void> }> {
    const operator = new pg.Client({ connectionString: url });
    await operator.connect();
    await operator.query('BEGIN');
    await operator.query(sql);
    return {
      async release() {
        await operator.query('ROLLBACK');
        await operator.end();
      },
    };
  }

  it('answers 503 while an operator holds a lock on the tokens, and the token it could not consume still works afterwards', async () => {
    const issued = await app.http.post('/api/sso/token', { ...creds(f.client), username: f.user.username });
    expect(issued.status, issued.text).toBe(200);
    const before = await app.db.query<{ n: number }>('SELECT count(*)::int AS n FROM sso_tokens');

    const lock = await holdLock('LOCK TABLE sso_tokens IN ACCESS EXCLUSIVE MODE');
    try {
      expectUnavailable(await app.http.post('/api/sso/validate', { ...creds(f.client), token: issued.body.token }), 'validation');
      expectUnavailable(await app.http.post('/api/validate-token', { ...creds(f.client), token: issued.body.token }), 'legacy validation');
      expectUnavailable(await app.http.post('/api/sso/token', { ...creds(f.client), username: f.user.username }), 'token issue');
    } finally {
      await lock.release();
    }

    // PostgreSQL cancelled the statements: no token was written, none consumed
    const after = await app.db.query<{ n: number }>('SELECT count(*)::int AS n FROM sso_tokens');
    expect(after.rows[0].n).toBe(before.rows[0].n);
    const validated = await app.http.post('/api/sso/validate', { ...creds(f.client), token: issued.body.token });
    expect(validated.status, validated.text).toBe(200);
    expect(validated.body.valid).toBe(true);
  });

  it('answers 503 when PostgreSQL goes silent under open connections, then serves again once it answers', async () => {
    // connections open and idle in the pool
    expect((await app.http.post('/api/sso/token', { ...creds(f.client), username: f.user.username })).status).toBe(200);
    proxy.freeze();
    try {
      expectUnavailable(await app.http.post('/api/sso/token', { ...creds(f.client), username: f.user.username }), 'token issue');
      expectUnavailable(await app.http.post('/api/auth/login', { login: f.user.username, password: f.user.password }), 'login');
    } finally {
      await proxy.restore();
    }
    let last = 0;
    for (let i = 0; i < 100 && last !== 200; i++) {
      last = (await app.http.post('/api/sso/token', { ...creds(f.client), username: f.user.username })).status;
      if (last !== 200) await new Promise((r) => setTimeout(r, 50));
    }
    expect(last, 'a token is issued again once PostgreSQL answers').toBe(200);
  });

  it('has PostgreSQL end a transaction left idle for a minute (a process stalled inside one), so its locks do not outlive it', async () => {
    const r = await app.db.query<{ idle_in_transaction_session_timeout: string }>('SHOW idle_in_transaction_session_timeout');
    expect(r.rows[0].idle_in_transaction_session_timeout).toBe('1min');
  });

  it('does not bound a migration step\'s statements (unbounded): a step longer than the read bound is not cut off', async () => {
    const db = openPostgres(url, { statementTimeoutMs: 1 }); // a read bound of the margin alone, 2 s
    try {
      const slow = (options?: { unbounded: true }) => db.transaction(async (tx) => {
        await tx.exec('SET LOCAL statement_timeout = 0'); // as migrations lift the server's bound
        return (await tx.query<{ done: boolean }>('SELECT true AS done FROM pg_sleep(2.3)', [], options)).rows[0].done;
      });
      await expect(slow(), 'an ordinary statement is given up').rejects.toThrow('Query read timeout');
      expect(await slow({ unbounded: true })).toBe(true);
      // the steps migrate.ts runs (src/db/migration-steps.ts) ask for it on every statement
      const steps = await readFile(new URL('../../src/db/migration-steps.ts', import.meta.url), 'utf8');
      expect((steps.match(/, UNBOUNDED,?\s*\)/g) ?? []).length, 'one per statement').toBe(steps.match(/tx\.query\b/g)!.length);
    } finally {
      await db.close();
    }
  });

  it('does not bound migrations: one longer than the statement timeout is applied', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'auth-migrations-'));
    await writeFile(path.join(dir, '0001_slow.sql'), 'SELECT pg_sleep(1.5);\nCREATE TABLE slow_done (id int);\n');
    const db = openPostgres(url, { statementTimeoutMs: 1000 });
    try {
      // the same bound stops an ordinary statement
      await expect(db.query('SELECT pg_sleep(1.5)')).rejects.toMatchObject({ code: '57014' });
      // schema_migrations of this database holds the real migrations: a scratch schema for the test's own
      await db.exec('CREATE SCHEMA IF NOT EXISTS slow_migrations');
      const scoped = openPostgres(`${url}${url.includes('?') ? '&' : '?'}options=${encodeURIComponent('-c search_path=slow_migrations')}`, { statementTimeoutMs: 1000 });
      try {
        expect(await migrate(scoped, dir)).toStrictEqual(['0001_slow.sql']);
        const done = await scoped.query<{ present: boolean }>(`SELECT to_regclass('slow_migrations.slow_done') IS NOT NULL AS present`);
        expect(done.rows[0].present).toBe(true);
      } finally {
        await scoped.close();
      }
    } finally {
      await db.close();
    }
  });
});
