import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { migrate } from '../../src/db/migrate.ts';
import { openDatabase } from '../../src/db/open.ts';
import { REQUIRED_SCHEMA } from '../../src/db/required-schema.ts';
import { findSchemaProblems, SchemaCheckError } from '../../src/db/schema-check.ts';
import { createInstance } from '../../src/service.ts';
import { createMigratedDatabase, startTestApp, TEST_ENV } from '../helpers/app.ts';
import { asRole, onPostgres } from '../helpers/db.ts';
import { startServerProcess } from '../helpers/processes.ts';

const silent = pino({ level: 'silent' });
const testConfig = async () => loadConfig({ ...TEST_ENV, DATA_DIR: await mkdtemp(path.join(os.tmpdir(), 'auth-schema-')) });

/** The one line createInstance refused to start with. */
async function startRefusal(db: Parameters<typeof createInstance>[1]): Promise<string> {
  const err = await createInstance(await testConfig(), db, silent).then(
    async (instance) => {
      await instance.stop();
      throw new Error('the service started');
    },
    (e: Error) => e,
  );
  expect(err).toBeInstanceOf(SchemaCheckError);
  expect(err.message).not.toMatch(/\n/);
  return err.message;
}

describe('the start-up check of the schema', () => {
  it('finds a freshly migrated database usable, and lists every table the migrations create', async () => {
    const t = await createMigratedDatabase();
    try {
      expect(await findSchemaProblems(t.db)).toStrictEqual([]);
      const tables = await t.db.query<{ name: string }>(
        `SELECT c.relname AS name FROM pg_class c WHERE c.relkind IN ('r', 'p') AND c.relnamespace = to_regnamespace(current_schema())`);
      const unlisted = tables.rows.map((r) => r.name).filter((name) => !(name in REQUIRED_SCHEMA));
      expect(unlisted, 'tables the migrations create but src/db/required-schema.ts does not list').toStrictEqual([]);
    } finally {
      await t.drop();
    }
  });

  it('refuses to start on a database where tables were dropped, naming them', async () => {
    const t = await createMigratedDatabase();
    try {
      await t.db.exec('DROP TABLE webhook_attempts; DROP TABLE sso_tokens;');
      const message = await startRefusal(t.db);
      expect(message).toMatch(/^The database cannot be used: missing tables: sso_tokens, webhook_attempts$/);
    } finally {
      await t.drop();
    }
  });

  it('refuses to start, and lists every trigger of the migrations, when a trigger the service relies on is dropped or disabled', async () => {
    const t = await createMigratedDatabase();
    try {
      const made = await t.db.query<{ table_name: string; name: string }>(
        `SELECT c.relname AS table_name, tg.tgname AS name FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid
          WHERE NOT tg.tgisinternal AND c.relnamespace = to_regnamespace(current_schema())`);
      const unlisted = made.rows.filter((r) => !(REQUIRED_SCHEMA[r.table_name]?.triggers ?? []).includes(r.name)).map((r) => `${r.table_name}.${r.name}`);
      expect(unlisted, 'triggers the migrations create but src/db/required-schema.ts does not list').toStrictEqual([]);
      // the trigger that audits every change of a client row, whoever writes it
      await t.db.exec('DROP TRIGGER clients_after_write ON clients; ALTER TABLE clients DISABLE TRIGGER clients_notify_change;');
      expect(await startRefusal(t.db)).toBe('The database cannot be used: missing triggers: clients.clients_after_write; disabled triggers: clients.clients_notify_change');
    } finally {
      await t.drop();
    }
  });

  it('refuses to start when a column the service uses is missing', async () => {
    const t = await createMigratedDatabase();
    try {
      await t.db.exec('ALTER TABLE users DROP COLUMN totp_last_step');
      expect(await startRefusal(t.db)).toMatch(/missing columns: users\.totp_last_step/);
    } finally {
      await t.drop();
    }
  });

  it('refuses to start when a unique key the service relies on is missing (found by a review helper)', async () => {
    const t = await createMigratedDatabase();
    try {
      // a restore whose post-data section failed, or a dropped constraint: ON CONFLICT (login) fails
      // on every wrong password, and one holder per link name quietly stops holding
      await t.db.exec('ALTER TABLE login_attempts DROP CONSTRAINT login_attempts_pkey; DROP INDEX user_client_links_active_name');
      const activeName = "user_client_links(client_id,username_key) WHERE (status = 'active'::text)";
      expect(await startRefusal(t.db)).toBe(`The database cannot be used: missing unique keys: login_attempts(login), ${activeName}`);
      // a unique index on the right columns does as well as the constraint; a partial one only with the predicate asked for
      await t.db.exec('CREATE UNIQUE INDEX login_attempts_again ON login_attempts (login); CREATE UNIQUE INDEX links_partial ON user_client_links (client_id, username_key) WHERE status = \'pending\'');
      expect(await findSchemaProblems(t.db)).toStrictEqual([`missing unique keys: ${activeName}`]);
      await t.db.exec('CREATE UNIQUE INDEX links_active ON user_client_links (client_id, username_key) WHERE status = \'active\'');
      expect(await findSchemaProblems(t.db)).toStrictEqual([]);
    } finally {
      await t.drop();
    }
  });

  it('refuses to start for a database user that may only read', async () => {
    const t = await createMigratedDatabase();
    try {
      const reader = (role: string) => `CREATE ROLE ${role} LOGIN; GRANT USAGE ON SCHEMA public TO ${role}; GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${role};`;
      await asRole(t, reader, async (db, role) => {
        const message = await startRefusal(db);
        expect(message).toMatch(new RegExp(`the database user "${role}" may not INSERT, UPDATE, DELETE on users, login_attempts, `));
        expect(message).toMatch(/may not INSERT on audit_log/);
      });
    } finally {
      await t.drop();
    }
  });

  it('keeps /readyz at 503 with the reason while a table is missing', async () => {
    const app = await startTestApp();
    try {
      expect((await app.http.get('/readyz')).status).toBe(200);
      await app.db.exec('DROP TABLE user_client_links');
      const ready = await app.http.get('/readyz');
      expect(ready.status).toBe(503);
      expect(ready.body.error).toBe('not_ready');
      expect(ready.body.message).toMatch(/missing tables: user_client_links/);
    } finally {
      await app.close();
    }
  });

  it('makes the service process exit with one line naming the missing table', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'auth-schema-proc-'));
    const t = onPostgres ? await createMigratedDatabase() : undefined;
    const db = t?.db ?? (await openDatabase({ DATA_DIR: dataDir, DATABASE_URL: undefined }, { serve: false }));
    if (!t) await migrate(db);
    await db.exec('DROP TABLE webhook_attempts');
    if (!t) await db.close();
    try {
      const failure = await startServerProcess({ DATA_DIR: dataDir, DATABASE_URL: t?.url ?? '' }).then(
        async (s) => {
          await s.stop();
          return 'started';
        },
        (err: Error) => err.message,
      );
      const lines = failure.split('\n').filter((l) => l.includes('missing tables'));
      expect(lines.length, failure).toBe(1);
      expect(lines[0]).toMatch(/failed to start: The database cannot be used: missing tables: webhook_attempts/);
      expect(failure).toMatch(/server exited with 1/);
    } finally {
      await t?.drop();
    }
  });
});
