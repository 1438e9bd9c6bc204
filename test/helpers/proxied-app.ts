import type { Logger } from 'pino';
import { openPostgres } from '../../src/db/postgres.ts';
import { startTestApp, type TestApp } from './app.ts';
import { createTestDatabase } from './db.ts';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.ts';

/**
 * The service on a fresh PostgreSQL database (TEST_DATABASE_URL) that it reaches only through
 * a TCP proxy the test cuts, blocks or freezes (tcp-proxy.ts). `pool` are openPostgres's
 * options for the service's pool; `url` is the database's own address, past the proxy.
 * `close()` serves again, stops the service and drops the database.
 */
export async function startAppBehindProxy(
  env: Record<string, string> = {},
  options: { pool?: Parameters<typeof openPostgres>[1]; logger?: Logger } = {},
): Promise<{ app: TestApp; proxy: TcpProxy; url: string; close(): Promise<void> }> {
  const t = await createTestDatabase();
  await t.db.close();
  const url = t.url!;
  const target = new URL(url);
  const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
  const proxied = proxy.urlFor(url);
  const app = await startTestApp(env, { db: openPostgres(proxied, options.pool), databaseUrl: proxied, logger: options.logger });
  return {
    app,
    proxy,
    url,
    async close() {
      await proxy.restore();
      await app.db.close().catch(() => {});
      await app.close();
      await proxy.close();
      await t.drop();
    },
  };
}
