import { afterCommitOf, type Queryable } from './db.ts';

/**
 * Binds one value into the statement being composed and answers its placeholder (`$1`,
 * `$2`, ... in the order bound), so SQL composed from several pieces never numbers its
 * placeholders by hand.
 */
export type Bind = (value: unknown) => string;

/** The values of one statement being composed and the `bind` that adds to them. */
export function statementParams(): { bind: Bind; values: unknown[] } {
  const values: unknown[] = [];
  return {
    values,
    bind: (value) => {
      values.push(value);
      return `$${values.length}`;
    },
  };
}

/**
 * One write that can share a statement with others: its SQL, written with `bind` for every
 * value. Several parts run as the data-modifying CTEs of one statement, which PostgreSQL
 * applies atomically: one round trip and no BEGIN/COMMIT, where a transaction of the same
 * writes would take one round trip each plus two. The statement's text depends only on
 * which parts it has (each part binds the same values in the same order whatever they
 * are), so it is prepared once per connection.
 */
export interface WritePart {
  sql(bind: Bind): string;
  /**
   * For a part whose SQL ends in RETURNING: what the statement answers, selected from the
   * part's returned rows (named `cte`). One part of a statement at most.
   */
  answer?(cte: string): string;
  /**
   * What is to happen once the part's rows are committed: after the statement, or inside a
   * transaction after its COMMIT (never after a rollback). A part that answers is given the
   * rows the statement answered; one that does not is registered as it is, so the same
   * function given by several parts of one transaction runs once.
   */
  committed?(answered: unknown[]): void;
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
  const { bind, values } = statementParams();
  let rows: T[] = [];
  if (live.length === 1 && answering.length === 0) {
    await q.query(live[0].sql(bind), values, { prepare: true });
  } else {
    const ctes = live.map((part, i) => `w${i} AS (${part.sql(bind)})`);
    const answer = answering.length ? `SELECT ${answering[0].answer!(`w${live.indexOf(answering[0])}`)}` : 'SELECT 1';
    const r = await q.query<T>(`WITH ${ctes.join(',\n')}\n${answer}`, values, { prepare: true });
    if (answering.length) rows = r.rows;
  }
  const afterCommit = afterCommitOf(q);
  for (const part of live) {
    if (!part.committed) continue;
    const committed = part.committed;
    afterCommit(part.answer ? () => committed(rows) : committed as () => void);
  }
  return rows;
}
