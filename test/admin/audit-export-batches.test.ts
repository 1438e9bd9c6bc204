import { once } from 'node:events';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIRST_BATCH, streamAudit } from '../../src/audit/export.ts';
import type { Db, Queryable, Transaction } from '../../src/db/db.ts';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';

/** `db`, whose statements (a transaction's too) first await `before(sql)`. */
function delaying(db: Db, before: (sql: string) => Promise<void>): Db {
  const wrap = <Q extends Queryable>(q: Q): Q => new Proxy(q, {
    get(target, prop, receiver) {
      if (prop === 'query') return async (sql: string, ...rest: unknown[]) => { await before(sql); return (target.query as (...a: unknown[]) => unknown)(sql, ...rest); };
      if (prop === 'transaction') return (fn: (tx: Transaction) => Promise<unknown>) => (target as unknown as Db).transaction((tx) => fn(wrap(tx)));
      const value = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return wrap(db);
}

/**
 * The export's first batch is a page's worth of rows, so its first byte leaves as soon as a page
 * would; then it reads full batches; every row is written once, in id order.
 */
describe('the audit export: a small first batch, then full ones', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());

  it('writes the first page of rows first, then batches growing four times to the full size, and every row once', async () => {
    const action = unique('test.export.batches.');
    const total = FIRST_BATCH + 4 * FIRST_BATCH + 16 * FIRST_BATCH + 1000 + 70;
    await app.db.query(`INSERT INTO audit_log (action, outcome, username) SELECT $1, 'success', 'u' || n FROM generate_series(1, $2::int) AS n`, [action, total]);
    const chunks: string[][] = [];
    const out = new Writable({
      write(chunk, _enc, done) {
        chunks.push(String(chunk).split('\n').filter(Boolean).map((line) => JSON.parse(line).username));
        done();
      },
    });
    const count = await streamAudit(app.db, { action }, 'ndjson', out, { batchSize: 1000 });
    expect(count).toBe(total);
    expect(chunks.map((c) => c.length), 'a page, growing batches, full ones, then the rest')
      .toStrictEqual([FIRST_BATCH, 4 * FIRST_BATCH, 16 * FIRST_BATCH, 1000, 70]);
    expect(chunks.flat()).toStrictEqual(Array.from({ length: total }, (_, i) => `u${i + 1}`));
  });

  it('ends after a first batch that is not full', async () => {
    const action = unique('test.export.batches.');
    await app.db.query(`INSERT INTO audit_log (action, outcome, username) SELECT $1, 'success', 'v' || n FROM generate_series(1, 3) AS n`, [action]);
    const lines: string[] = [];
    const count = await streamAudit(app.db, { action }, 'ndjson', new Writable({ write(chunk, _enc, done) { lines.push(...String(chunk).split('\n').filter(Boolean)); done(); } }));
    expect(count).toBe(3);
    expect(lines).toHaveLength(3);
  });

  it('stops when the receiver goes away while a batch is read: those rows are neither formatted nor counted', async () => {
    const action = unique('test.export.batches.');
    await app.db.query(`INSERT INTO audit_log (action, outcome, username) SELECT $1, 'success', 'w' || n FROM generate_series(1, $2::int) AS n`, [action, FIRST_BATCH + 100]);
    let written = 0;
    const out = new Writable({ write(chunk, _enc, done) { written += String(chunk).split('\n').filter(Boolean).length; done(); } });
    let batches = 0;
    // the receiver closes the connection as the second batch's statement goes to the database
    const db = delaying(app.db, async (sql) => {
      if (!/FROM audit_log/.test(sql) || ++batches !== 2) return;
      out.destroy();
      await once(out, 'close');
    });
    const count = await streamAudit(db, { action }, 'ndjson', out, { batchSize: 200 });
    expect(batches, 'the second batch was read').toBe(2);
    expect(written).toBe(FIRST_BATCH);
    expect(count, 'the entries written, not the batch read for no one').toBe(FIRST_BATCH);
  });
});
