import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pruneLockOf } from '../../src/retention/pruner.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { admin } from '../helpers/cli.ts';
import { onPostgres } from '../helpers/db.ts';
import { parsePrometheus, sampleValue } from '../ops/helpers/prometheus.ts';
import { eventually } from '../webhooks/receiver.ts';
import { present, seed, SEEDED_COUNTS, sorted } from './support.ts';

describe('the background pass', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ PRUNE_INTERVAL: '1s', TOKEN_SWEEP_INTERVAL_MS: '3600000' });
  });
  afterAll(() => app.close());

  it('prunes by itself every PRUNE_INTERVAL and reports it in the metrics', async () => {
    const startedAt = Date.now() / 1000;
    const rows = await seed(app);
    await eventually(async () => Object.values(await present(app.db, rows.gone)).every((keys) => keys.length === 0), 15_000, 'the background pass');
    expect(await present(app.db, rows.kept)).toStrictEqual(sorted(rows.kept));
    const metrics = parsePrometheus((await app.metrics.get('/metrics')).text);
    for (const [table, n] of Object.entries(SEEDED_COUNTS)) {
      expect(sampleValue(metrics, 'auth_pruned_rows_total', { table }), table).toBe(n);
    }
    expect(sampleValue(metrics, 'auth_prune_last_pass_timestamp_seconds') >= startedAt).toBe(true);
  });
});

describe.skipIf(!onPostgres)('pruning next to other sessions (PostgreSQL)', () => {
  let app: TestApp;
  let other: pg.Client;
  beforeAll(async () => {
    app = await startTestApp({ PRUNE_INTERVAL: '0', TOKEN_SWEEP_INTERVAL_MS: '3600000' });
    other = new pg.Client({ connectionString: app.databaseUrl });
    await other.connect();
  });
  afterAll(async () => {
    await other.end();
    await app.close();
  });

  const prune = async () => JSON.parse((await admin(app, ['prune', '--json'])).stdout);

  it('passes over a row another transaction holds instead of waiting for it, and takes it later', async () => {
    const rows = await seed(app);
    const [held] = rows.gone.audit_log;
    await other.query('BEGIN');
    await other.query('SELECT 1 FROM audit_log WHERE id = $1 FOR UPDATE', [held]);
    const report = await prune();
    expect(report.tables).toStrictEqual({ ...SEEDED_COUNTS, audit_log: 0 });
    expect(await present(app.db, { audit_log: [held] })).toStrictEqual({ audit_log: [held] });
    await other.query('COMMIT');
    expect((await prune()).tables.audit_log).toBe(1);
  });

  it('leaves a kind of row to the instance already pruning it, without waiting', async () => {
    const rows = await seed(app);
    const [lockClass, kind] = pruneLockOf('webhook_deliveries');
    await other.query('BEGIN');
    await other.query('SELECT pg_advisory_xact_lock($1::int, $2::int)', [lockClass, kind]);
    const report = await prune();
    expect(report.tables).toStrictEqual({ ...SEEDED_COUNTS, webhook_deliveries: 0, webhook_attempts: 0 });
    expect(report.left_to_other_instance).toStrictEqual(['webhook_deliveries', 'webhook_attempts']);
    expect(await present(app.db, { webhook_deliveries: rows.gone.webhook_deliveries })).toStrictEqual(sorted({ webhook_deliveries: rows.gone.webhook_deliveries }));
    await other.query('COMMIT');
    expect((await prune()).tables).toStrictEqual({ ...Object.fromEntries(Object.keys(SEEDED_COUNTS).map((t) => [t, 0])), webhook_deliveries: 2, webhook_attempts: 6 });
  });
});
