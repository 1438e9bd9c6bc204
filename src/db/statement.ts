import type { Queryable } from './db.ts';

/**
 * One write that can share a statement with others: its SQL with placeholders numbered from
 * `first`, and their values. Several parts run as the data-modifying CTEs of one statement,
 * which PostgreSQL applies atomically: one round trip and no BEGIN/COMMIT, where a
 * transaction of the same writes would take one round trip each plus two. The statement's
 * text depends only on which parts it has, so it is prepared once per connection.
 */
export interface WritePart {
  sql(first: number): string;
  values: unknown[];
  /**
   * For a part whose SQL ends in RETURNING: what the statement answers, selected from the
   * part's returned rows (named `cte`). One part of a statement at most.
   */
  answer?(cte: string): string;
}

/**
 * Runs the parts as one statement. Parts that are null write nothing. Answers the rows of
 * the part with `answer`, or none.
 */
export async function writeTogether<T = never>(q: Queryable, parts: ReadonlyArray<WritePart | null>): Promise<T[]> {
  const live = parts.filter((p): p is WritePart => p !== null);
  if (live.length === 0) return [];
  const answering = live.filter((p) => p.answer);
  if (answering.length > 1) throw new Error('writeTogether: only one part may answer');
  if (live.length === 1 && answering.length === 0) {
    await q.query(live[0].sql(1), live[0].values, { prepare: true });
    return [];
  }
  let next = 1;
  const ctes = live.map((part, i) => {
    const cte = `w${i} AS (${part.sql(next)})`;
    next += part.values.length;
    return cte;
  });
  const answer = answering.length ? `SELECT ${answering[0].answer!(`w${live.indexOf(answering[0])}`)}` : 'SELECT 1';
  const r = await q.query<T>(`WITH ${ctes.join(',\n')}\n${answer}`, live.flatMap((p) => p.values), { prepare: true });
  return answering.length ? r.rows : [];
}

/** `$first`, `$first+1`, ... as many as `count`: placeholders for a part's SQL. */
export function placeholders(first: number, count: number): string[] {
  return Array.from({ length: count }, (_, i) => `$${first + i}`);
}
