import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { streamAudit } from '../../src/audit/export.ts';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { holdLocks } from '../helpers/locks.ts';

/**
 * An audit row is written in the transaction of the change it records, so rows commit out of
 * id order (a transaction waiting on a lock holds a lower id than rows committed after it).
 * The export reads the log in keyset batches; they must see one state of the log.
 */
describe.runIf(onPostgres)('the audit export under concurrent writes (PostgreSQL: transactions at once)', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());

  it('is the log as it was when the export began: a row committed between two batches below an id already written is not skipped, it was never in', async () => {
    const action = unique('test.export.race.');
    const insert = (name: string) => `INSERT INTO audit_log (action, outcome, username) VALUES ('${action}', 'success', '${name}')`;
    // A: written by a transaction still open (as one waiting for a row lock)
    const commitA = await holdLocks(app.db, insert('A'));
    // B: committed meanwhile, with a higher id
    await app.db.query(insert('B'));
    const exported: string[] = [];
    let first = true;
    const out = new Writable({
      highWaterMark: 1,
      write(chunk, _enc, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) exported.push(JSON.parse(line).username);
        if (!first) return done();
        first = false;
        // between two batches: A commits, then C is written
        commitA().then(() => app.db.query(insert('C'))).then(() => done(), done);
      },
    });
    // the code of GET /api/admin/audit?format=ndjson, with batches of one row instead of 1,000
    await streamAudit(app.db, { action }, 'ndjson', out, { batchSize: 1 });
    expect(exported, 'before: B, C (C without A, which committed before it: no state the log was ever in)').toStrictEqual(['B']);
    const later: string[] = [];
    await streamAudit(app.db, { action }, 'ndjson', new Writable({ write(chunk, _enc, done) { later.push(...String(chunk).split('\n').filter(Boolean).map((l) => JSON.parse(l).username)); done(); } }));
    expect(later, 'the next export has them all').toStrictEqual(['A', 'B', 'C']);
  });
});
