/** Result of one statement, the same shape on PostgreSQL and on the embedded database. */
export interface QueryResult<T> {
  rows: T[];
  rowCount: number;
}

/** How a statement is run. */
export interface QueryOptions {
  /**
   * Keep the statement parsed and planned on each connection (a named prepared statement on
   * PostgreSQL) instead of parsing and planning it on every call, which for the hot paths'
   * CTE statements cost PostgreSQL more than running them. Only for SQL text that never
   * varies with the values, and with explicit column lists (a prepared `SELECT *` fails once
   * a migration adds a column while the service runs).
   */
  prepare?: boolean;
  /**
   * No read bound on the answer (DATABASE_STATEMENT_TIMEOUT plus a margin otherwise): a
   * migration's steps, which run as long as the data they rewrite needs (migrations lift the
   * server's statement bound too, src/db/migrate.ts).
   */
  unbounded?: boolean;
}

/** Anything that runs parameterized SQL: the database itself or an open transaction. */
export interface Queryable {
  query<T = Record<string, unknown>>(sql: string, params?: unknown[], options?: QueryOptions): Promise<QueryResult<T>>;
  /** Runs a script of several statements without parameters (migrations). */
  exec(sql: string): Promise<void>;
}

/** Where `Db.listen` delivers a channel's notifications and whether it is listening. */
export interface ListenHandlers {
  notify(payload: string): void;
  listening(on: boolean): void;
}

/** A channel being listened to. */
export interface Listener {
  close(): Promise<void>;
}

/**
 * An open transaction: its statements, and what is to happen once it has committed (the
 * unit of work). A statement run on the database itself commits on its own.
 */
export interface Transaction extends Queryable {
  /**
   * Runs `fn` once the transaction has committed, never when it rolls back; a function
   * registered twice runs once (so "wake the dispatcher" registered by every event recorded
   * in the transaction wakes it once).
   */
  afterCommit(fn: () => void): void;
}

/**
 * Where `q`'s work takes effect: inside a transaction, `fn` waits for its commit; on the
 * database itself the statement has already committed, so `fn` runs now.
 */
export function afterCommitOf(q: Queryable): (fn: () => void) => void {
  return 'afterCommit' in q && typeof q.afterCommit === 'function' ? (fn) => (q as Transaction).afterCommit(fn) : (fn) => fn();
}

/**
 * The store the service runs on. Code above the data layer only sees this interface and
 * never knows whether PostgreSQL or the embedded PGlite database is underneath.
 */
export interface Db extends Queryable {
  readonly kind: 'postgres' | 'embedded';
  /**
   * How another thread can open its own connections to this database (PostgreSQL opened
   * from a connection string); undefined for the embedded database, which lives in this
   * thread's memory.
   */
  readonly connectionString?: string;
  /**
   * Runs `fn` in one transaction: committed when it resolves, rolled back when it throws.
   * After the commit, the functions registered with `tx.afterCommit` run (src/db/unit-of-work.ts).
   */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T>;
  /**
   * Delivers the notifications of `channel` (NOTIFY, pg_notify) to `handlers.notify`, from
   * commit on, until the returned function is called. `handlers.listening(false)` says that
   * notifications may have been lost since (the connection that listens is gone; it is
   * opened again), `listening(true)` that they are delivered again. Absent: not supported.
   */
  listen?(channel: string, handlers: ListenHandlers): Listener;
  /** Connections in use and waiting, for /metrics. */
  poolStats(): { total: number; idle: number; waiting: number };
  close(): Promise<void>;
}

/**
 * Whether `err` is PostgreSQL's unique_violation (23505): a row inserted at the same moment
 * by another request won the race a check-then-insert cannot close by itself.
 */
export function isUniqueViolation(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '23505';
}
