import { createHash } from 'node:crypto';
import pg from 'pg';
import type { Db, ListenHandlers, Listener, Queryable, QueryOptions, QueryResult } from './db.ts';
import { runUnitOfWork } from './unit-of-work.ts';

// int8 (counts, bigint ids) as numbers, as PGlite returns them; values here stay far below 2^53.
pg.types.setTypeParser(20, (v) => Number.parseInt(v, 10));

/** Names of prepared statements by their SQL: the same text gets the same name on every connection. */
const statementNames = new Map<string, string>();

function statementName(sql: string): string {
  let name = statementNames.get(sql);
  if (name === undefined) {
    name = `s_${createHash('sha256').update(sql).digest('hex').slice(0, 32)}`;
    statementNames.set(sql, name);
  }
  return name;
}

/** How long a new connection may take before the request waiting for it fails (a 503, not a hang). */
export const CONNECT_TIMEOUT_MS = 5_000;

/**
 * How much longer than the server's own bound (statement_timeout) an answer is waited for
 * before the connection is given up: only a server or network gone silent gets that far.
 */
export const SILENT_SERVER_MARGIN_MS = 2_000;

/** A statement with node-postgres's per-query read bound, which its type declarations omit. */
type TimedQuery = pg.QueryConfig & { query_timeout?: number };

/** node-postgres's error for an answer that did not come within `query_timeout`. */
const isReadTimeout = (err: unknown) => err instanceof Error && err.message === 'Query read timeout';

/**
 * Opens a pooled PostgreSQL connection.
 *
 * `statementTimeoutMs` (DATABASE_STATEMENT_TIMEOUT; 0 or absent: none) bounds every statement
 * on the server (`statement_timeout`, a lock wait included), so a statement stuck behind an
 * operator's lock is cancelled and rolled back by PostgreSQL itself: the request answers 503
 * and nothing it meant to write is written (a single-use token it would have consumed stays
 * usable). An answer that has not come `SILENT_SERVER_MARGIN_MS` after that (a server or
 * network gone silent under an open connection) fails the statement here too, and its
 * connection is dropped instead of going back to the pool. A transaction left idle that long
 * six times over (at least a minute; a process stalled mid-transaction) is ended by the
 * server, so its locks do not outlive it. A script (`exec`: a migration, a seed file) is not
 * given up here; migrations lift the server's bound themselves (src/db/migrate.ts).
 */
export function openPostgres(
  target: string | pg.PoolConfig,
  options: { max?: number; prepare?: boolean; connectTimeoutMs?: number; statementTimeoutMs?: number } = {},
): Db {
  // false: QueryOptions.prepare is ignored (a server whose sessions outlive or span our connections)
  const prepare = options.prepare ?? true;
  const base = typeof target === 'string' ? { connectionString: target } : target;
  const statementTimeoutMs = options.statementTimeoutMs ?? 0;
  const bounds = statementTimeoutMs > 0
    ? { statement_timeout: statementTimeoutMs, idle_in_transaction_session_timeout: Math.max(60_000, 6 * statementTimeoutMs) }
    : {};
  const readTimeout = statementTimeoutMs > 0 ? statementTimeoutMs + SILENT_SERVER_MARGIN_MS : undefined;
  // connectionTimeoutMillis: a server that accepts no connection (down behind a firewall, or
  // every slot taken) fails the waiting request after a bound instead of holding it forever.
  const pool = new pg.Pool({
    max: options.max ?? 20, idleTimeoutMillis: 30_000, connectionTimeoutMillis: options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS, ...bounds, ...base,
  });
  // An idle client losing its connection must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  const run = async <T>(client: pg.Pool | pg.PoolClient, sql: string, params?: unknown[], options?: QueryOptions): Promise<QueryResult<T>> => {
    // node-postgres prepares a named statement once per connection, then only binds and runs it
    const config: TimedQuery = {
      text: sql, values: params as unknown[], name: prepare && options?.prepare ? statementName(sql) : undefined,
      query_timeout: options?.unbounded ? undefined : readTimeout,
    };
    const r = await client.query(config);
    return { rows: r.rows as T[], rowCount: r.rowCount ?? 0 };
  };
  const control = (client: pg.PoolClient, sql: string) => client.query<never>({ text: sql, query_timeout: readTimeout } as TimedQuery);
  return {
    kind: 'postgres',
    connectionString: base.connectionString,
    query: (sql, params, options) => run(pool, sql, params, options),
    exec: async (sql) => void (await pool.query(sql)),
    transaction: (work) => runUnitOfWork(async (fn) => {
      const client = await pool.connect();
      // A connection lost while this transaction holds the client between two statements is
      // emitted as 'error' on the client, which the pool listens for only while it is idle:
      // unheard, it would crash the process. Heard, the next statement fails (a 503) and the
      // broken client is destroyed on release instead of going back to the pool.
      let lost: Error | undefined;
      const onLost = (err: Error) => {
        lost = err;
      };
      client.on('error', onLost);
      const tx: Queryable = {
        query: (sql, params, options) => run(client, sql, params, options),
        exec: async (sql) => void (await client.query(sql)),
      };
      try {
        await control(client, 'BEGIN');
        const result = await fn(tx);
        await control(client, 'COMMIT');
        return result;
      } catch (err) {
        // A connection gone silent is not asked to roll back (that would wait as long again):
        // it is dropped, and the server rolls the transaction back when it notices.
        if (isReadTimeout(err)) lost ??= err as Error;
        else {
          await control(client, 'ROLLBACK').catch((rollbackErr: Error) => {
            lost ??= rollbackErr; // a client that cannot roll back is not reused
          });
        }
        throw err;
      } finally {
        client.off('error', onLost);
        client.release(lost);
      }
    }, work),
    listen: (channel, handlers) => listenOnOwnConnection(base, channel, handlers, options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS),
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    close: () => pool.end(),
  };
}

/** How long after losing its connection the listener connects again. */
const LISTEN_RETRY_MS = 1_000;

/**
 * LISTEN on a connection of its own (a pooled one would be returned to the pool and its
 * notifications lost). When it drops, `listening(false)` at once, then a new connection
 * every LISTEN_RETRY_MS until one listens again.
 */
function listenOnOwnConnection(base: pg.ClientConfig, channel: string, handlers: ListenHandlers, connectTimeoutMs: number): Listener {
  let stopped = false;
  let current: pg.Client | undefined;
  let retry: NodeJS.Timeout | undefined;
  const connect = async () => {
    retry = undefined;
    // named, so an operator sees in pg_stat_activity what the long-lived idle connection is
    const client = new pg.Client({ application_name: `auth-service listen ${channel}`, ...base, connectionTimeoutMillis: connectTimeoutMs });
    let gone = false;
    const lost = () => {
      if (gone) return;
      gone = true;
      if (current === client) {
        current = undefined;
        handlers.listening(false);
      }
      client.end().catch(() => {});
      if (!stopped) retry = setTimeout(() => void connect(), LISTEN_RETRY_MS);
    };
    client.on('error', lost);
    client.on('end', lost);
    client.on('notification', (n) => {
      if (n.channel === channel) handlers.notify(n.payload ?? '');
    });
    try {
      await client.connect();
      await client.query(`LISTEN "${channel.replace(/"/g, '""')}"`);
    } catch {
      lost();
      return;
    }
    if (stopped || gone) {
      if (!gone) client.end().catch(() => {});
      return;
    }
    current = client;
    handlers.listening(true);
  };
  void connect();
  return {
    async close() {
      stopped = true;
      clearTimeout(retry);
      const client = current;
      current = undefined;
      if (client) {
        handlers.listening(false);
        await client.end().catch(() => {});
      }
    },
  };
}
