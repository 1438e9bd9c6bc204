import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Db, Queryable } from './db.ts';
import { MIGRATION_STEPS } from './migration-steps.ts';

const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));
/** Arbitrary constant: the advisory lock every instance takes while migrating. */
const MIGRATION_LOCK_KEY = 7_240_117;

/** An applied migration's file no longer has the content that was applied; the message is one line. */
export class MigrationChecksumError extends Error {}

/**
 * SHA-256 of a migration's text. Line endings are normalized, so a checkout that turned LF
 * into CRLF is not a change.
 */
export function migrationChecksum(sql: string): string {
  return createHash('sha256').update(sql.replace(/\r\n/g, '\n')).digest('hex');
}

/**
 * Applies every migrations/NNNN_name.sql not yet recorded, in name order, each in its own
 * transaction under an advisory lock, so two instances starting at once apply each once.
 * A migration with a step SQL cannot do (src/db/migration-steps.ts) has it run right after
 * its file, in the same transaction.
 * Each migration's checksum is recorded with it; an applied migration whose file changed
 * since stops this with MigrationChecksumError before anything is applied (a database
 * migrated before checksums existed gets the files' checksums recorded on its first run).
 * Returns the names applied by this call.
 */
export async function migrate(db: Db, dir = MIGRATIONS_DIR): Promise<string[]> {
  await ensureMigrationsTable(db);
  const files = await migrationFiles(dir);
  const sources = new Map<string, { sql: string; checksum: string }>();
  for (const name of files) {
    const sql = await readFile(path.join(dir, name), 'utf8');
    sources.set(name, { sql, checksum: migrationChecksum(sql) });
  }
  await verifyChecksums(db, sources);

  const applied: string[] = [];
  for (const [name, { sql, checksum }] of sources) {
    const done = await db.transaction(async (tx) => {
      await lockForMigration(tx);
      const seen = await tx.query('SELECT 1 FROM schema_migrations WHERE name = $1', [name], { unbounded: true });
      if (seen.rowCount > 0) return false;
      await tx.exec(sql);
      await MIGRATION_STEPS[name]?.(tx);
      await tx.query('INSERT INTO schema_migrations (name, checksum) VALUES ($1, $2)', [name, checksum]);
      return true;
    });
    if (done) applied.push(name);
  }
  return applied;
}

/** The migrations' file names, in the order they apply. */
async function migrationFiles(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((f) => /^\d{4}_[\w-]+\.sql$/.test(f)).sort();
}

/**
 * The migrations not yet applied to `db`, in order (every one when it has never been
 * migrated), found without writing anything: for commands that must not create or change a
 * schema, such as the command line's read-only ones.
 */
export async function pendingMigrations(db: Queryable, dir = MIGRATIONS_DIR): Promise<string[]> {
  const files = await migrationFiles(dir);
  if (!(await tableExists(db))) return files;
  const applied = new Set((await db.query<{ name: string }>('SELECT name FROM schema_migrations')).rows.map((r) => r.name));
  return files.filter((f) => !applied.has(f));
}

/**
 * Takes the migration lock for the rest of `tx`, which is not bounded by
 * DATABASE_STATEMENT_TIMEOUT (src/db/postgres.ts): the wait may be for another instance's
 * long migration, and a migration may rightly take long (an index built on a large table).
 * A script, so that no bound of the client's applies to the wait either. Seeds applied at
 * start (SEED_ON_START, src/seeds/start.ts) take it too.
 */
export async function lockForMigration(tx: Queryable): Promise<void> {
  await tx.exec(`SET LOCAL statement_timeout = 0; SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`);
}

/** schema_migrations with its checksum column (added to a table made before checksums existed). */
async function ensureMigrationsTable(db: Db): Promise<void> {
  await db.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
    name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now(), checksum text)`).catch(async (err) => {
    // Two instances racing on CREATE TABLE IF NOT EXISTS can collide on the catalog; one wins.
    // A user without CREATE on the schema gets here too when the table exists.
    if (!(await tableExists(db))) throw err;
  });
  if (await hasChecksumColumn(db)) return;
  await db.transaction(async (tx) => {
    await lockForMigration(tx);
    await tx.query('ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS checksum text');
  });
}

/**
 * Refuses a changed applied migration; records the checksum of applied migrations that have
 * none yet (applied before checksums existed). A user that may not write the table leaves
 * them unrecorded: the start-up check reports what it may not do.
 */
async function verifyChecksums(db: Db, sources: Map<string, { checksum: string }>): Promise<void> {
  const recorded = await db.query<{ name: string; checksum: string | null }>('SELECT name, checksum FROM schema_migrations ORDER BY name');
  const unrecorded: string[] = [];
  for (const row of recorded.rows) {
    const source = sources.get(row.name);
    if (!source) continue; // applied by a newer version of the service: nothing to compare with
    if (row.checksum === null) unrecorded.push(row.name);
    else if (row.checksum !== source.checksum) {
      throw new MigrationChecksumError(
        `Migration ${row.name} was changed after it was applied (recorded sha256 ${row.checksum.slice(0, 12)}…, the file now ${source.checksum.slice(0, 12)}…): ` +
        'restore the file as it was applied and put the change in a new migration',
      );
    }
  }
  if (unrecorded.length === 0) return;
  await db.transaction(async (tx) => {
    await lockForMigration(tx);
    for (const name of unrecorded) {
      await tx.query('UPDATE schema_migrations SET checksum = $2 WHERE name = $1 AND checksum IS NULL', [name, sources.get(name)!.checksum]);
    }
  }).catch((err: { code?: string }) => {
    if (err.code !== '42501') throw err; // insufficient_privilege: a read-only user, reported by the start-up check
  });
}

async function tableExists(db: Queryable): Promise<boolean> {
  const r = await db.query(`SELECT to_regclass('schema_migrations') IS NOT NULL AS present`);
  return Boolean((r.rows[0] as { present: boolean }).present);
}

async function hasChecksumColumn(db: Db): Promise<boolean> {
  const r = await db.query<{ present: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('schema_migrations') AND attname = 'checksum' AND NOT attisdropped) AS present`);
  return Boolean(r.rows[0]?.present);
}
