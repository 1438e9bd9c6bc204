import { createHash, randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import type { Db } from '../../src/db/db.ts';
import type { PGlite } from '@electric-sql/pglite';
import { embeddedDb, openEmbedded } from '../../src/db/embedded.ts';
import { migrate } from '../../src/db/migrate.ts';
import { openPostgres } from '../../src/db/postgres.ts';
import { ROOT } from './processes.ts';

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
  return createPostgresDatabase(adminUrl);
}

/** A new, empty database on the PostgreSQL server of `adminUrl` (or a copy of `template`). */
async function createPostgresDatabase(adminUrl: string, template?: string): Promise<{ db: Db; url: string; drop(): Promise<void> }> {
  const name = `auth_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  await withAdmin(adminUrl, (admin) => admin.query(`CREATE DATABASE ${name}${template ? ` TEMPLATE ${template}` : ''}`));
  const url = databaseUrl(adminUrl, name);
  const db = openPostgres(url);
  return {
    db,
    url,
    async drop() {
      await db.close().catch(() => {}); // a test may have closed it already
      await withAdmin(adminUrl, (admin) => admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}

/**
 * A fresh database with every migration applied. Embedded: an in-memory PGlite in the state
 * right after the migrations (see leaseEmbedded). PostgreSQL: a new database copied from a
 * migrated template database (see migratedTemplate).
 */
export async function createMigratedTestDatabase(): Promise<{ db: Db; url?: string; drop(): Promise<void> }> {
  const adminUrl = process.env.TEST_DATABASE_URL;
  if (!adminUrl) return leaseEmbedded();
  return createPostgresDatabase(adminUrl, await migratedTemplate(adminUrl));
}

/**
 * Runs `fn` on the database `t` as a new role, given what `grants(role)` says (SQL creating and
 * granting it): on PostgreSQL over a connection of its own, logged in as the role; on the
 * embedded database, which has one session, after SET ROLE. Afterwards the role is gone (its
 * privileges dropped); `t` stays the caller's to drop.
 */
export async function asRole<T>(t: { db: Db; url?: string }, grants: (role: string) => string, fn: (db: Db, role: string) => Promise<T>): Promise<T> {
  const role = `auth_role_${randomBytes(4).toString('hex')}`;
  await t.db.exec(grants(role));
  try {
    if (!onPostgres) {
      await t.db.exec(`SET ROLE ${role}`);
      try {
        return await fn(t.db, role);
      } finally {
        await t.db.exec('RESET ROLE');
      }
    }
    const url = new URL(t.url!);
    url.username = role;
    const db = openPostgres(url.toString());
    try {
      return await fn(db, role);
    } finally {
      await db.close();
    }
  } finally {
    await t.db.exec(`DROP OWNED BY ${role}; DROP ROLE ${role}`);
  }
}

async function withAdmin<T>(adminUrl: string, fn: (admin: pg.Client) => Promise<T>): Promise<T> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.end();
  }
}

function databaseUrl(adminUrl: string, name: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

// ---------------------------------------------------------------------------------------
// PostgreSQL: one migrated template database per set of migration files.

const PG_TEMPLATE = Symbol.for('auth-service.test.migrated-template');

/**
 * The name of a database on the server holding exactly what the migrations create, made
 * once for the current migration files (its name carries their hash, so a changed or added
 * migration gets a new template) by whichever test process gets there first, under an
 * advisory lock. CREATE DATABASE ... TEMPLATE copies it in a fraction of the time the
 * migrations take to run.
 */
function migratedTemplate(adminUrl: string): Promise<string> {
  const holder = globalThis as { [PG_TEMPLATE]?: Promise<string> };
  holder[PG_TEMPLATE] ??= (async () => {
    const dir = path.join(ROOT, 'migrations');
    const hash = createHash('sha256');
    for (const file of (await readdir(dir)).sort()) hash.update(file).update('\0').update(await readFile(path.join(dir, file))).update('\0');
    const name = `auth_template_${hash.digest('hex').slice(0, 16)}`;
    await withAdmin(adminUrl, async (admin) => {
      await admin.query("SELECT pg_advisory_lock(hashtext('auth-service test template'))");
      try {
        if ((await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount) return;
        // built under another name and renamed when complete: a half-built template is never used
        const building = `${name}_building`;
        await admin.query(`DROP DATABASE IF EXISTS ${building} WITH (FORCE)`);
        await admin.query(`CREATE DATABASE ${building}`);
        const db = openPostgres(databaseUrl(adminUrl, building));
        try {
          await migrate(db);
        } finally {
          await db.close();
        }
        await admin.query(`ALTER DATABASE ${building} RENAME TO ${name}`);
      } finally {
        await admin.query("SELECT pg_advisory_unlock(hashtext('auth-service test template'))");
      }
    });
    return name;
  })();
  return holder[PG_TEMPLATE];
}

// ---------------------------------------------------------------------------------------
// Embedded: migrated PGlite instances, reused once they are back in the migrated state.

const POOL = Symbol.for('auth-service.test.pglite-pool');
/** Idle instances kept per worker process (each holds its own in-memory database). */
const MAX_IDLE = 3;

interface EmbeddedPool {
  template: Promise<{ pglite: PGlite; fingerprint: string; keep: string[] }>;
  idle: PGlite[];
}

/**
 * A migrated database on an in-memory PGlite, for one test file. Starting PGlite takes
 * seconds (its WebAssembly and initdb) and so does a clone of a migrated one (its data
 * directory is written out and read back in), while emptying the tables takes milliseconds.
 * So an instance a file has dropped is emptied (every table the migrations left empty is
 * truncated, identities restarted, session state discarded) and lent again, but only if it
 * is then in exactly the state of a freshly migrated one: same schema, roles, settings,
 * sequences and rows (the fingerprint below). Anything else, a test that changed the schema
 * for instance, and the instance is closed and the next file gets a new clone.
 *
 * The lease is a Db of its own: once dropped or closed it refuses every query as a closed
 * PGlite does, so nothing a test left running can reach the next test's data.
 */
async function leaseEmbedded(): Promise<{ db: Db; drop(): Promise<void> }> {
  const holder = globalThis as { [POOL]?: EmbeddedPool };
  const pool = (holder[POOL] ??= {
    template: openEmbedded().then(async ({ db, pglite }) => {
      await migrate(db);
      const keep = await tablesWithRows(pglite);
      return { pglite, keep, fingerprint: await fingerprint(pglite, keep) };
    }),
    idle: [],
  });
  const template = await pool.template;
  const pglite = pool.idle.pop() ?? ((await template.pglite.clone()) as PGlite);
  let closed = false;
  const inner = embeddedDb(pglite);
  const open = () => {
    if (closed) throw new Error('PGlite is closed');
  };
  const db: Db = {
    ...inner,
    query: async (sql, params) => (open(), inner.query(sql, params)),
    exec: async (sql) => (open(), inner.exec(sql)),
    transaction: async (fn) => (open(), inner.transaction(fn)),
    close: async () => {
      open();
      closed = true;
    },
  };
  let dropped = false;
  return {
    db,
    async drop() {
      closed = true;
      if (dropped) return;
      dropped = true;
      if (pool.idle.length < MAX_IDLE && (await resetToTemplate(pglite, template))) pool.idle.push(pglite);
      else await pglite.close().catch(() => {});
    },
  };
}

/** Empties `pglite` back to the template's state; false if it is not then identical to it. */
async function resetToTemplate(pglite: PGlite, template: { fingerprint: string; keep: string[] }): Promise<boolean> {
  try {
    if (pglite.closed || pglite.isInTransaction()) return false;
    await pglite.exec('DISCARD ALL');
    const tables = (await pglite.query<{ t: string }>(
      `SELECT format('%I.%I', schemaname, tablename) AS t FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')`)).rows
      .map((r) => r.t).filter((t) => !template.keep.includes(t));
    if (tables.length) await pglite.exec(`TRUNCATE ${tables.join(', ')} RESTART IDENTITY CASCADE`);
    return (await fingerprint(pglite, template.keep)) === template.fingerprint;
  } catch {
    return false;
  }
}

/** Tables the migrations wrote rows into (their bookkeeping): kept, and compared row by row. */
async function tablesWithRows(pglite: PGlite): Promise<string[]> {
  const tables = (await pglite.query<{ t: string }>(
    `SELECT format('%I.%I', schemaname, tablename) AS t FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')`)).rows.map((r) => r.t);
  const withRows: string[] = [];
  for (const t of tables) if ((await pglite.query(`SELECT 1 FROM ${t} LIMIT 1`)).rows.length) withRows.push(t);
  return withRows;
}

/**
 * One hash over everything a test could change that a truncate does not reset: namespaces,
 * relations and their columns, constraints, indexes, triggers, functions, types, rules,
 * policies, roles and memberships, per-role and per-database settings, extensions,
 * sequence positions, large objects, the rows of `keep` tables, and the row count of every
 * other table.
 */
async function fingerprint(pglite: PGlite, keep: string[]): Promise<string> {
  const user = `NOT IN ('pg_catalog', 'information_schema', 'pg_toast')`;
  const r = await pglite.query<{ line: string }>(`
    SELECT 'ns ' || nspname || ' ' || coalesce(nspacl::text, '') AS line FROM pg_namespace
    UNION ALL SELECT 'rel ' || c.oid::regclass::text || ' ' || c.relkind::text || ' ' || coalesce(c.relacl::text, '') || ' ' || c.relrowsecurity::text || ' ' || coalesce(c.reloptions::text, '')
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname ${user}
    UNION ALL SELECT 'col ' || a.attrelid::regclass::text || ' ' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull::text
        || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '') || ' ' || a.attidentity::text || a.attgenerated::text || ' ' || coalesce(a.attacl::text, '')
      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
      WHERE n.nspname ${user} AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL SELECT 'con ' || c.conrelid::regclass::text || ' ' || c.conname || ' ' || pg_get_constraintdef(c.oid)
      FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname ${user}
    UNION ALL SELECT 'idx ' || indexdef FROM pg_indexes WHERE schemaname ${user}
    UNION ALL SELECT 'trg ' || pg_get_triggerdef(oid) || ' ' || tgenabled::text FROM pg_trigger WHERE NOT tgisinternal
    UNION ALL SELECT 'fn ' || p.oid::regprocedure::text || ' ' || md5(coalesce(p.prosrc, '')) || ' ' || coalesce(p.proconfig::text, '') || ' ' || coalesce(p.proacl::text, '')
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname ${user}
    UNION ALL SELECT 'type ' || t.oid::regtype::text FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname ${user}
    UNION ALL SELECT 'enum ' || enumtypid::regtype::text || ' ' || enumlabel FROM pg_enum
    UNION ALL SELECT 'rule ' || schemaname || '.' || tablename || ' ' || rulename || ' ' || md5(definition) FROM pg_rules WHERE schemaname ${user}
    UNION ALL SELECT 'view ' || schemaname || '.' || viewname || ' ' || md5(definition) FROM pg_views WHERE schemaname ${user}
    UNION ALL SELECT 'policy ' || polrelid::regclass::text || ' ' || polname FROM pg_policy
    UNION ALL SELECT 'role ' || rolname || ' ' || concat_ws(',', rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin, rolreplication, rolbypassrls, rolconnlimit)
      || ' ' || coalesce(rolconfig::text, '') FROM pg_roles
    UNION ALL SELECT 'member ' || roleid::regrole::text || ' ' || member::regrole::text FROM pg_auth_members
    UNION ALL SELECT 'setting ' || setdatabase::text || ' ' || setrole::text || ' ' || setconfig::text FROM pg_db_role_setting
    UNION ALL SELECT 'db ' || datname || ' ' || coalesce(datacl::text, '') || ' ' || datallowconn::text FROM pg_database
    UNION ALL SELECT 'ext ' || extname || ' ' || extversion FROM pg_extension
    UNION ALL SELECT 'seq ' || schemaname || '.' || sequencename || ' ' || coalesce(last_value::text, 'unused') FROM pg_sequences
    UNION ALL SELECT 'lo ' || count(*)::text FROM pg_largeobject_metadata
    UNION ALL SELECT 'defacl ' || defaclrole::regrole::text || ' ' || defaclobjtype::text || ' ' || defaclacl::text FROM pg_default_acl
    ORDER BY 1`);
  const hash = createHash('sha256');
  for (const row of r.rows) hash.update(row.line).update('\n');
  const tables = (await pglite.query<{ t: string }>(
    `SELECT format('%I.%I', schemaname, tablename) AS t FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1`)).rows.map((row) => row.t);
  for (const t of tables) {
    const content = keep.includes(t)
      ? `SELECT coalesce(string_agg(x::text, E'\\n' ORDER BY x::text), '') AS v FROM ${t} x`
      : `SELECT count(*)::text AS v FROM ${t}`;
    hash.update(`${t} ${(await pglite.query<{ v: string }>(content)).rows[0].v}\n`);
  }
  return hash.digest('hex');
}
