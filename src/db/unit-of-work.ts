import type { Queryable, Transaction } from './db.ts';

/**
 * The unit of work of both database adapters: runs `work` in the transaction `begin` opens
 * and, once it has committed, the functions registered with `afterCommit` (in the order
 * first registered, each once). Nothing registered runs when the transaction rolls back.
 * This is the one place where what a use case recorded (its webhook events) is handed on
 * after the commit: use cases never wake or hand over anything themselves.
 */
export async function runUnitOfWork<T>(
  begin: (body: (tx: Queryable) => Promise<T>) => Promise<T>,
  work: (tx: Transaction) => Promise<T>,
): Promise<T> {
  const committed = new Set<() => void>();
  const result = await begin((tx) => work({
    query: (sql, params, options) => tx.query(sql, params, options),
    exec: (sql) => tx.exec(sql),
    afterCommit: (fn) => void committed.add(fn),
  }));
  for (const fn of committed) fn();
  return result;
}
