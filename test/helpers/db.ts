import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Db } from '../../src/db/db.ts';
import type { PGlite } from '@electric-sql/pglite';
import { embeddedDb, openEmbedded } from '../../src/db/embedded.ts';
import { migrate } from '../../src/db/migrate.ts';
import { openPostgres } from '../../src/db/postgres.ts';

/** Which database the tests run on: PostgreSQL when TEST_DATABASE_URL is set, else embedded. */
export const onPostgres = Boolean(process.env.TEST_DATABASE_URL);

/**
 * A fresh, empty database for one test file: on PostgreSQL a new database created from
 * TEST_DATABASE_URL and dropped at the end; otherwise an in-memory PGlite.
 * `url` is the connection string (PostgreSQL only), for child processes.
 */
export async function createTestDatabase(): Promise<{ db: Db; url?: string; drop(): Promise<void> }> {
  const adminUrl = process.env.TEST_DATABASE_URL;
  if (!adminUrl) {
    const { db } = await openEmbedded();
    return { db, drop: () => db.close() };
  }
  const name = `auth_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const db = openPostgres(url.toString());
  return {
    db,
    url: url.toString(),
    async drop() {
      await db.close().catch(() => {}); // a test may have closed it already
      const a = new pg.Client({ connectionString: adminUrl });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await a.end();
    },
  };
}

const TEMPLATE = Symbol.for('auth-service.test.migrated-pglite');

/**
 * A fresh database with every migration applied. Embedded: a clone of a migrated in-memory
 * PGlite kept for this worker process, because starting PGlite (its WebAssembly and initdb)
 * takes seconds and a clone milliseconds; each clone is its own database. PostgreSQL: a new
 * database, migrated.
 */
export async function createMigratedTestDatabase(): Promise<{ db: Db; url?: string; drop(): Promise<void> }> {
  if (!process.env.TEST_DATABASE_URL) {
    const holder = globalThis as { [TEMPLATE]?: Promise<PGlite> };
    holder[TEMPLATE] ??= openEmbedded().then(async ({ db, pglite }) => {
      await migrate(db);
      return pglite;
    });
    const clone = await (await holder[TEMPLATE]).clone();
    const db = embeddedDb(clone);
    return { db, drop: () => db.close() };
  }
  const t = await createTestDatabase();
  await migrate(t.db);
  return t;
}
