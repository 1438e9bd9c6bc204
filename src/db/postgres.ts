import pg from 'pg';
import type { Db, Queryable, QueryResult } from './db.ts';

// int8 (counts, bigint ids) as numbers, as PGlite returns them; values here stay far below 2^53.
pg.types.setTypeParser(20, (v) => Number.parseInt(v, 10));

/** Opens a pooled PostgreSQL connection. */
export function openPostgres(target: string | pg.PoolConfig, options: { max?: number } = {}): Db {
  const base = typeof target === 'string' ? { connectionString: target } : target;
  const pool = new pg.Pool({ max: options.max ?? 20, idleTimeoutMillis: 30_000, ...base });
  // An idle client losing its connection must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  const run = async <T>(client: pg.Pool | pg.PoolClient, sql: string, params?: unknown[]): Promise<QueryResult<T>> => {
    const r = await client.query(sql, params as unknown[]);
    return { rows: r.rows as T[], rowCount: r.rowCount ?? 0 };
  };
  return {
    kind: 'postgres',
    connectionString: base.connectionString,
    query: (sql, params) => run(pool, sql, params),
    exec: async (sql) => void (await pool.query(sql)),
    async transaction(fn) {
      const client = await pool.connect();
      const tx: Queryable = {
        query: (sql, params) => run(client, sql, params),
        exec: async (sql) => void (await client.query(sql)),
      };
      try {
        await client.query('BEGIN');
        const result = await fn(tx);
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        client.release();
      }
    },
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    close: () => pool.end(),
  };
}
