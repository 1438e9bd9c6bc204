import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/db.ts';
import { openEmbedded } from '../../src/db/embedded.ts';
import { migrate } from '../../src/db/migrate.ts';
import { applySeeds } from '../../src/seeds/apply.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { onPostgres } from '../helpers/db.ts';
import { seedSql } from './support.ts';

/**
 * Legitimate seed files the check that a seed changes only the clients table
 * (src/seeds/table-writes.ts) refused at first (a review helper, 2026-11-27).
 */
const billing = (name: string) => seedSql([{ id: 'billing', name, callback: 'https://billing.example.com/sso/callback', ips: ['10.20.0.0/16'], secret: 's3cret' }]);
const HASH = 'a'.repeat(64);

describe.skipIf(onPostgres)('a seed on a database whose schema name needs quoting', () => {
  let db: Db;
  beforeAll(async () => {
    ({ db } = await openEmbedded());
    await db.query('CREATE SCHEMA "auth-service"');
    await db.query('SET search_path TO "auth-service"'); // the embedded database has one session
    await migrate(db);
  });
  afterAll(() => db?.close());

  it('applies the upsert of docs/clients-as-code.md', async () => {
    expect((await applySeeds(db, [{ name: 'clients.sql', sql: billing('Billing') }])).created).toStrictEqual(['billing']);
  });
});

describe('a seed file whose DO block catches an error after a client was written', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());

  it('is applied: the rolled-back block wrote nothing, its audit row included', async () => {
    const sql = `DO $$
BEGIN
  INSERT INTO clients (client_id, client_name, callback_url, allowed_ips, secret_hash)
    VALUES ('pair-web', 'Pair web', 'https://pair.example/cb', '{}', '${HASH}');
  INSERT INTO clients (client_id, client_name, callback_url, allowed_ips, secret_hash)
    VALUES ('pair-api', 'Pair API', 'not a url', '{}', '${HASH}');
EXCEPTION WHEN check_violation THEN
  RAISE NOTICE 'pair skipped: %', SQLERRM;
END $$;
${seedSql([{ id: 'solo', name: 'Solo', callback: 'https://solo.example/cb', ips: ['10.0.0.0/8'], secret: 's-solo' }])}`;
    const r = await applySeeds(app.db, [{ name: 'pair.sql', sql }]);
    expect(r.created).toStrictEqual(['solo']);
  });
});

describe.runIf(onPostgres)('a seed run while another session of the same database works on its own tables', () => {
  let app: TestApp;
  let other: pg.Client;
  let holder: pg.Client;
  beforeAll(async () => {
    app = await startTestApp();
    other = new pg.Client({ connectionString: app.databaseUrl });
    holder = new pg.Client({ connectionString: app.databaseUrl });
    await other.connect();
    await holder.connect();
    await other.query('CREATE SCHEMA reporting; CREATE TABLE reporting.staging (x int); INSERT INTO reporting.staging VALUES (1); CREATE TABLE public_scratch (x int)');
    await applySeeds(app.db, [{ name: 'clients.sql', sql: billing('Billing') }]);
  });
  afterAll(async () => {
    await holder?.end();
    await other?.end();
    await app?.close();
  });

  it('is applied: the file wrote only clients, whatever the other session truncated, created or dropped meanwhile', async () => {
    await holder.query('BEGIN');
    await holder.query("SELECT 1 FROM clients WHERE client_id = 'billing' FOR UPDATE");
    const run = applySeeds(app.db, [{ name: 'clients.sql', sql: billing('Billing 2') }]);
    for (let i = 0; i < 200; i++) {
      const waiting = await other.query("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO clients%'");
      if (waiting.rowCount) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    await other.query('TRUNCATE reporting.staging');
    await other.query('CREATE TABLE reporting.daily (x int); CREATE TABLE scratch_daily (x int); DROP TABLE public_scratch');
    await holder.query('COMMIT');
    expect((await run).updated).toStrictEqual(['billing']);
  });
});
