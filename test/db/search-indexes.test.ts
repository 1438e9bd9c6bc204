import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { searchAdminUsers } from '../../src/admin/queries.ts';
import { auditPage } from '../../src/audit/queries.ts';
import type { Db, Queryable } from '../../src/db/db.ts';
import { createMigratedTestDatabase } from '../helpers/db.ts';

/**
 * migrations/0030 and 0031: the admin user search uses one trigram index over the three
 * columns it matches (pg_trgm, on PostgreSQL and on PGlite), and the audit page filtered by
 * action and outcome its index; the search's results stay what they were, short terms and
 * `%`/`_` included, and a term is never matched across two columns.
 */

/** The statement a read sends, with its parameters, captured instead of run. */
async function statementOf(read: (q: Queryable) => Promise<unknown>): Promise<{ sql: string; params: unknown[] }> {
  let seen: { sql: string; params: unknown[] } | null = null;
  const spy: Queryable = {
    query: async (sql: string, params?: unknown[]) => {
      seen = { sql, params: params ?? [] };
      return { rows: [], rowCount: 0 };
    },
    exec: async () => {},
  } as unknown as Queryable;
  await read(spy);
  if (!seen) throw new Error('no statement');
  return seen;
}

/** The nodes of an EXPLAIN (FORMAT JSON) plan, flattened. */
function nodesOf(plan: any): any[] {
  return [plan, ...((plan.Plans ?? []) as any[]).flatMap(nodesOf)];
}

/**
 * The plan of `sql` with the planner's sequential scans off (a small table would otherwise be
 * read whole) and, `bitmapOnly`, plain index scans too: on a few thousand rows the primary key
 * read newest first until the page is full is cheapest, as it is for a term every row matches.
 * A GIN index is only ever read by a bitmap scan.
 */
async function planOf(db: Db, sql: string, params: unknown[], bitmapOnly = false): Promise<any[]> {
  return db.transaction(async (tx) => {
    await tx.query('SET LOCAL enable_seqscan = off');
    if (bitmapOnly) await tx.query('SET LOCAL enable_indexscan = off');
    const r = await tx.query<Record<string, any>>(`EXPLAIN (FORMAT JSON) ${sql}`, params);
    const json = Object.values(r.rows[0])[0];
    const doc = typeof json === 'string' ? JSON.parse(json) : json;
    return nodesOf(doc[0].Plan);
  });
}

const like = (q: string) => `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

describe('search indexes (migrations/0030, 0031)', () => {
  let t: Awaited<ReturnType<typeof createMigratedTestDatabase>>;
  const ids: Record<string, number> = {};
  beforeAll(async () => {
    t = await createMigratedTestDatabase();
    await t.db.query(
      `INSERT INTO users (username, email, full_name, password_hash)
       SELECT 'filler' || g, 'filler' || g || '@example.com', 'Filler Person ' || g, 'x' FROM generate_series(1, 3000) g`);
    const add = async (key: string, username: string, email: string, fullName: string) => {
      ids[key] = (await t.db.query<{ id: number }>('INSERT INTO users (username, email, full_name, password_hash) VALUES ($1, $2, $3, $4) RETURNING id',
        [username, email, fullName, 'x'])).rows[0].id;
    };
    await add('name', 'quokkaname', 'a1@example.org', 'Someone');
    await add('email', 'plainuser', 'QUOKKA.mail@example.org', 'Someone Else');
    await add('full', 'other', 'a2@example.org', 'Grace Quokka Hopper');
    await add('percent', 'pct', 'a3@example.org', 'Hundred 100% Sure');
    await add('under', 'x_y', 'a4@example.org', 'Under Score');
    await add('short', 'qj', 'a5@example.org', 'Jq');
    await t.db.query('ANALYZE users');
    await t.db.query('ANALYZE audit_log');
  });
  afterAll(() => t?.drop());

  const search = async (q: string) => (await searchAdminUsers(t.db, like(q), 100)).map((u) => u.id).sort((a, b) => a - b);

  it('has the extension and the indexes', async () => {
    const ext = await t.db.query("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'");
    expect(ext.rowCount).toBe(1);
    const r = await t.db.query<{ indexname: string }>(
      "SELECT indexname FROM pg_indexes WHERE tablename IN ('users', 'audit_log') AND indexname LIKE ANY (ARRAY['%trgm', 'audit_log_action_outcome']) ORDER BY indexname");
    // one trigram index on users: the three per-column ones of 0030 are gone
    expect(r.rows.map((x) => x.indexname)).toStrictEqual(['audit_log_action_outcome', 'users_search_trgm']);
    // no pending list: after a bulk load of users it made the planner prefer a Seq Scan
    const options = await t.db.query<{ reloptions: string[] | null }>("SELECT reloptions FROM pg_class WHERE relname = 'users_search_trgm'");
    expect(options.rows.map((x) => x.reloptions)).toStrictEqual([['fastupdate=off']]);
  });

  it('finds by each of the three columns, case-insensitively', async () => {
    expect(await search('quokka')).toStrictEqual([ids.name, ids.email, ids.full].sort((a, b) => a - b));
    expect(await search('QuOkKa.MAIL')).toStrictEqual([ids.email]);
    expect(await search('grace quokka')).toStrictEqual([ids.full]);
    expect(await search('zzzz')).toStrictEqual([]);
  });

  it('does not match a term across two columns, though the indexed text joins them', async () => {
    // quokkaname's text is "quokkaname a1@example.org Someone"
    expect(await search('quokkaname a1')).toStrictEqual([]);
    expect(await search('example.org some')).toStrictEqual([]);
    expect(await search('quokkaname')).toStrictEqual([ids.name]);
  });

  it('matches % and _ literally, and short terms (no trigram) as before', async () => {
    expect(await search('%')).toStrictEqual([ids.percent]);
    expect(await search('0% s')).toStrictEqual([ids.percent]);
    expect(await search('_')).toStrictEqual([ids.under]);
    expect(await search('x_y')).toStrictEqual([ids.under]);
    expect(await search('QJ')).toStrictEqual([ids.short]);
    expect(await search('j')).toContain(ids.short);
    expect((await search('e')).length).toBe(100); // the limit
  });

  it('plans a 4+ character search on the one trigram index, not a Seq Scan on users', async () => {
    const { sql, params } = await statementOf((q) => searchAdminUsers(q, like('quokka'), 50));
    const nodes = await planOf(t.db, sql, params, true);
    const onUsers = nodes.filter((n) => n['Relation Name'] === 'users');
    expect(onUsers.some((n) => n['Node Type'] === 'Seq Scan')).toBe(false);
    const indexes = new Set(nodes.map((n) => n['Index Name']).filter(Boolean));
    expect([...indexes]).toContain('users_search_trgm');
  });

  it('plans the audit page filtered by action and outcome on audit_log_action_outcome', async () => {
    const { sql, params } = await statementOf((q) => auditPage(q, { action: 'user.login', outcome: 'failure' }, 50));
    const nodes = await planOf(t.db, sql, params);
    expect(nodes.map((n) => n['Index Name']).filter(Boolean)).toContain('audit_log_action_outcome');
  });
});
