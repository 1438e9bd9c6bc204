import { describe, expect, it } from 'vitest';
import { createMigratedTestDatabase } from '../helpers/db.ts';

/**
 * The databases test files get (test/helpers/db.ts): each one in the freshly migrated state,
 * whatever the file before did to the one it had, and unusable once dropped.
 */
describe('test databases', () => {
  it('hands every file a freshly migrated database, whatever the previous one was left with', async () => {
    const first = await createMigratedTestDatabase();
    const migrations = (await first.db.query('SELECT * FROM schema_migrations ORDER BY 1')).rows;
    const timeZone = (await first.db.query<{ tz: string }>("SELECT current_setting('TimeZone') AS tz")).rows[0].tz;
    await first.db.query("INSERT INTO users (username, email, password_hash) VALUES ('left-over', 'left-over@example.com', 'x')");
    await first.db.query("INSERT INTO users (username, email, password_hash) VALUES ('left-over-2', 'left-over-2@example.com', 'x')");
    await first.db.exec('ALTER TABLE clients ADD COLUMN left_over integer');
    await first.db.exec("SET TIME ZONE 'America/New_York'");
    await first.drop();
    const second = await createMigratedTestDatabase();
    try {
      expect((await second.db.query('SELECT count(*)::int AS n FROM users')).rows).toStrictEqual([{ n: 0 }]);
      const columns = await second.db.query("SELECT 1 FROM information_schema.columns WHERE table_name = 'clients' AND column_name = 'left_over'");
      expect(columns.rows, 'a column a test added is gone').toStrictEqual([]);
      expect((await second.db.query('SELECT * FROM schema_migrations ORDER BY 1')).rows).toStrictEqual(migrations);
      const user = await second.db.query<{ id: number }>("INSERT INTO users (username, email, password_hash) VALUES ('new', 'new@example.com', 'x') RETURNING id");
      expect(user.rows[0].id, 'identities start again at 1').toBe(1);
      const setting = await second.db.query<{ tz: string }>("SELECT current_setting('TimeZone') AS tz");
      expect(setting.rows[0].tz, 'a session setting a test changed is back to its default').toBe(timeZone);
    } finally {
      await second.drop();
    }
  });

  it('refuses every query on a database once it is dropped or closed', async () => {
    const t = await createMigratedTestDatabase();
    const { db } = t;
    await db.close();
    await expect(db.query('SELECT 1')).rejects.toThrow();
    await t.drop();
    const u = await createMigratedTestDatabase();
    await u.drop();
    await expect(u.db.query('SELECT 1')).rejects.toThrow();
    await expect(u.db.transaction((tx) => tx.query('SELECT 1'))).rejects.toThrow();
  });
});
