import type { Queryable } from './db.ts';
import { REQUIRED_SCHEMA, type RequiredTable } from './required-schema.ts';

/** The database cannot serve the service; the message is one line naming what is missing. */
export class SchemaCheckError extends Error {}

/**
 * Compares the database with what the service needs (required-schema.ts): every table and
 * column there, the triggers it relies on (present and enabled), the current user's
 * privileges on each table, and that the database accepts
 * writes at all (not a standby, not default_transaction_read_only). Returns the problems,
 * each a short phrase; an empty list when the database is usable. Tables are resolved
 * through the search_path, as the service's own statements resolve them.
 */
export async function findSchemaProblems(db: Queryable, required: Readonly<Record<string, RequiredTable>> = REQUIRED_SCHEMA): Promise<string[]> {
  const tables = Object.keys(required);
  const present = await db.query<{ table_name: string; column_name: string | null }>(
    `SELECT t.table_name, a.attname AS column_name
       FROM unnest($1::text[]) AS t(table_name)
       LEFT JOIN pg_attribute a ON a.attrelid = to_regclass(t.table_name) AND a.attnum > 0 AND NOT a.attisdropped
      WHERE to_regclass(t.table_name) IS NOT NULL`,
    [tables],
  );
  const columnsOf = new Map<string, Set<string>>();
  for (const row of present.rows) {
    const set = columnsOf.get(row.table_name) ?? new Set<string>();
    if (row.column_name) set.add(row.column_name);
    columnsOf.set(row.table_name, set);
  }
  const missingTables = tables.filter((t) => !columnsOf.has(t));
  const missingColumns = tables.flatMap((t) => {
    const have = columnsOf.get(t);
    return have ? required[t].columns.filter((c) => !have.has(c)).map((c) => `${t}.${c}`) : [];
  });

  const pairs = tables.filter((t) => columnsOf.has(t)).flatMap((t) => required[t].privileges.map((p) => [t, p] as const));
  const privileges = await db.query<{ table_name: string; privilege: string; granted: boolean; role: string }>(
    `SELECT x.table_name, x.privilege, has_table_privilege(to_regclass(x.table_name), x.privilege) AS granted, current_user AS role
       FROM unnest($1::text[], $2::text[]) AS x(table_name, privilege)`,
    [pairs.map(([t]) => t), pairs.map(([, p]) => p)],
  );
  // "may not INSERT, UPDATE, DELETE on users, clients": tables grouped by what they lack
  const lacking = new Map<string, string[]>();
  for (const row of privileges.rows) {
    if (row.granted) continue;
    const list = lacking.get(row.table_name) ?? [];
    list.push(row.privilege);
    lacking.set(row.table_name, list);
  }
  const byPrivileges = new Map<string, string[]>();
  for (const [table, privs] of lacking) byPrivileges.set(privs.join(', '), [...(byPrivileges.get(privs.join(', ')) ?? []), table]);
  const role = privileges.rows[0]?.role;

  const wanted = tables.filter((t) => columnsOf.has(t)).flatMap((t) => (required[t].triggers ?? []).map((name) => [t, name] as const));
  const triggers = await db.query<{ table_name: string; name: string; enabled: boolean }>(
    `SELECT x.table_name, x.name, tg.tgenabled <> 'D' AS enabled
       FROM unnest($1::text[], $2::text[]) AS x(table_name, name)
       JOIN pg_trigger tg ON tg.tgrelid = to_regclass(x.table_name) AND tg.tgname = x.name`,
    [wanted.map(([t]) => t), wanted.map(([, n]) => n)],
  );
  const found = new Map(triggers.rows.map((r) => [`${r.table_name}.${r.name}`, r.enabled]));
  const missingTriggers = wanted.map(([t, n]) => `${t}.${n}`).filter((k) => !found.has(k));
  const disabledTriggers = wanted.map(([t, n]) => `${t}.${n}`).filter((k) => found.get(k) === false);

  // a key is there when a valid unique index (or the primary key) has exactly its columns, and
  // no predicate (unique) or exactly its predicate (partialUnique)
  const keys = tables.filter((t) => columnsOf.has(t)).flatMap((t) => [
    ...(required[t].unique ?? []).map((cols) => [t, [...cols].sort().join(','), ''] as const),
    ...(required[t].partialUnique ?? []).map((k) => [t, [...k.columns].sort().join(','), k.where] as const),
  ]);
  const missingKeys = (await db.query<{ key: string }>(
    `SELECT x.table_name || '(' || x.cols || ')' || CASE WHEN x.pred = '' THEN '' ELSE ' WHERE ' || x.pred END AS key
       FROM unnest($1::text[], $2::text[], $3::text[]) AS x(table_name, cols, pred)
      WHERE NOT EXISTS (
        SELECT 1 FROM pg_index i
         WHERE i.indrelid = to_regclass(x.table_name) AND i.indisunique AND i.indisvalid AND i.indexprs IS NULL
           AND CASE WHEN x.pred = '' THEN i.indpred IS NULL ELSE pg_get_expr(i.indpred, i.indrelid) = x.pred END
           AND (SELECT string_agg(a.attname::text, ',' ORDER BY a.attname::text) FROM pg_attribute a
                 WHERE a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey::int2[])) = x.cols
           AND i.indnkeyatts = cardinality(string_to_array(x.cols, ',')))`,
    [keys.map(([t]) => t), keys.map(([, c]) => c), keys.map(([, , p]) => p)],
  )).rows.map((r) => r.key);

  const readOnly = await db.query<{ read_only: string }>(`SELECT current_setting('transaction_read_only') AS read_only`);

  const problems: string[] = [];
  if (missingTables.length) problems.push(`missing tables: ${missingTables.join(', ')}`);
  if (missingColumns.length) problems.push(`missing columns: ${missingColumns.join(', ')}`);
  if (missingTriggers.length) problems.push(`missing triggers: ${missingTriggers.join(', ')}`);
  if (disabledTriggers.length) problems.push(`disabled triggers: ${disabledTriggers.join(', ')}`);
  if (missingKeys.length) problems.push(`missing unique keys: ${missingKeys.join(', ')}`);
  for (const [privs, list] of byPrivileges) problems.push(`the database user "${role}" may not ${privs} on ${list.join(', ')}`);
  if (readOnly.rows[0]?.read_only === 'on') problems.push('the database accepts no writes (transaction_read_only is on: a standby, or default_transaction_read_only)');
  return problems;
}

/** Throws SchemaCheckError, one line naming every problem, unless the database is usable. */
export async function assertSchemaUsable(db: Queryable): Promise<void> {
  const problems = await findSchemaProblems(db);
  if (problems.length > 0) throw new SchemaCheckError(`The database cannot be used: ${problems.join('; ')}`);
}
