import type { Queryable } from './db.ts';

/**
 * One write that can share a statement with others: its SQL with placeholders numbered from
 * `first`, and their values. Several parts run as the data-modifying CTEs of one statement,
 * which PostgreSQL applies atomically: one round trip and no BEGIN/COMMIT, where a
 * transaction of the same writes would take one round trip each plus two.
 */
export interface WritePart {
  sql(first: number): string;
  values: unknown[];
}

/** Runs the parts as one statement (a single part as itself). Parts that are null write nothing. */
export async function writeTogether(q: Queryable, parts: ReadonlyArray<WritePart | null>): Promise<void> {
  const live = parts.filter((p): p is WritePart => p !== null);
  if (live.length === 0) return;
  if (live.length === 1) {
    await q.query(live[0].sql(1), live[0].values);
    return;
  }
  let next = 1;
  const ctes = live.map((part, i) => {
    const cte = `w${i} AS (${part.sql(next)})`;
    next += part.values.length;
    return cte;
  });
  await q.query(`WITH ${ctes.join(',\n')}\nSELECT 1`, live.flatMap((p) => p.values));
}

/** `$first`, `$first+1`, ... as many as `count`: placeholders for a part's SQL. */
export function placeholders(first: number, count: number): string[] {
  return Array.from({ length: count }, (_, i) => `$${first + i}`);
}
