import path from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { openPostgres } from '../../src/db/postgres.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createMigratedTestDatabase, onPostgres } from '../helpers/db.ts';
import { prepareServerEnv, startServerProcess } from '../ops/helpers/child-service.ts';
import { projectWith, type SeedClient, seedSql } from './support.ts';

const client = (id: string): SeedClient => ({ id, name: `Started ${id}`, callback: 'https://start.example/cb', ips: ['127.0.0.1'], secret: `${id}-secret` });

/** SEED_ON_START (docs/clients-as-code.md): applied at every start before ready, once for instances starting together. */
describe('SEED_ON_START', () => {
  const cleanup: Array<() => Promise<unknown>> = [];
  afterAll(async () => {
    for (const fn of cleanup.reverse()) await fn();
  });

  const creates = async (q: { query: TestApp['db']['query'] }) =>
    (await q.query<{ client_id: string; n: number }>("SELECT client_id, count(*)::int AS n FROM audit_log WHERE action = 'client.create' GROUP BY client_id ORDER BY client_id")).rows;

  it('two instances started together apply the folder once: one client.create per client, and both are ready', async () => {
    const folder = path.join(await projectWith({ 'seeds/10-a.sql': seedSql([client('start-a')]), 'seeds/20-b.sql': seedSql([client('start-b')]) }), 'seeds');
    if (onPostgres) {
      // two real processes on one PostgreSQL
      const prepared = await prepareServerEnv();
      cleanup.push(() => prepared.drop());
      const env = { ...prepared.env, SEED_ON_START: folder };
      const [one, two] = await Promise.all([startServerProcess(env), startServerProcess(env)]);
      cleanup.push(() => Promise.all([one, two].map(async (p) => { p.child.kill('SIGTERM'); await p.exited; })));
      for (const p of [one, two]) expect((await fetch(`${p.url}/readyz`)).status, p.output()).toBe(200);
      const logs = [one.output(), two.output()].map((o) => /"created":\[([^\]]*)\][^\n]*SEED_ON_START applied/.exec(o)?.[1]);
      expect(logs.sort(), 'one instance created both, the other nothing').toStrictEqual(['', '"start-a","start-b"']);
      const db = openPostgres(prepared.env.DATABASE_URL);
      cleanup.push(() => db.close());
      expect(await creates(db)).toStrictEqual([{ client_id: 'start-a', n: 1 }, { client_id: 'start-b', n: 1 }]);
      return;
    }
    // the embedded database allows one process: two instances in this one, on its database
    const t = await createMigratedTestDatabase();
    cleanup.push(() => t.drop());
    const [one, two] = await Promise.all([startTestApp({ SEED_ON_START: folder }, { db: t.db }), startTestApp({ SEED_ON_START: folder }, { db: t.db })]);
    cleanup.push(() => one.stop(), () => two.stop());
    for (const app of [one, two]) expect((await app.http.get('/readyz')).status).toBe(200);
    expect(await creates(t.db)).toStrictEqual([{ client_id: 'start-a', n: 1 }, { client_id: 'start-b', n: 1 }]);
    // and the next start changes nothing
    const audit = (await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_log')).rows[0].n;
    const three = await startTestApp({ SEED_ON_START: folder }, { db: t.db });
    cleanup.push(() => three.stop());
    expect((await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_log')).rows[0].n).toBe(audit);
  });

  it('a refused seed changes nothing and keeps the instance unready, with the reason on /readyz and in the log', async () => {
    const project = await projectWith({ 'seeds/10-good.sql': seedSql([client('start-good')]), 'seeds/20-bad.sql': seedSql([{ ...client('start-bad'), ips: ['localhost'] }]) });
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    const app = await startTestApp({ SEED_ON_START: path.join(project, 'seeds') }, { logger });
    cleanup.push(() => app.close());
    const ready = await app.http.get('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body.error).toBe('not_ready');
    expect(ready.body.message).toContain('SEED_ON_START was refused, nothing was applied:');
    expect(ready.body.message).toContain('20-bad.sql');
    expect(ready.body.message).toContain('"localhost"');
    expect((await app.http.get('/healthz')).status, 'alive, only not ready').toBe(200);
    expect((await app.db.query('SELECT client_id FROM clients')).rows, 'nothing applied, the good file neither').toStrictEqual([]);
    const logged = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'SEED_ON_START refused: this instance stays unready');
    expect(logged?.reason).toBe(ready.body.message);
    expect(logged?.level).toBe(50);
  });
});
