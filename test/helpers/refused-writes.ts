import { randomBytes } from 'node:crypto';
import type { Db } from '../../src/db/db.ts';

/**
 * Runs `attempt` while the database refuses (an exception, as an outage or a full disk would
 * strike) the writes `ops` of `table` whose row (`r`: NEW, or OLD for a DELETE) satisfies
 * `when`, an SQL condition; then lets them be again. A fault injected at one exact write,
 * with the real database and the real app around it.
 */
export async function withWritesRefused<T>(
  db: Db, refused: { table: string; ops: 'INSERT' | 'INSERT OR DELETE'; when: string }, attempt: () => Promise<T>,
): Promise<T> {
  const fn = `refuse_writes_${randomBytes(4).toString('hex')}`;
  await db.exec(`
    CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE r record;
    BEGIN
      IF TG_OP = 'DELETE' THEN r := OLD; ELSE r := NEW; END IF;
      IF ${refused.when} THEN RAISE EXCEPTION 'the database went away'; END IF;
      RETURN r;
    END $$;
    CREATE TRIGGER ${fn} BEFORE ${refused.ops} ON ${refused.table} FOR EACH ROW EXECUTE FUNCTION ${fn}();`);
  try {
    return await attempt();
  } finally {
    await db.exec(`DROP TRIGGER ${fn} ON ${refused.table}; DROP FUNCTION ${fn}();`);
  }
}
