import { describe, expect, it } from 'vitest';
import { startTestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { send } from '../helpers/http.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';

/*
 * docs/fail-safe.md: a backing store that is unreachable *or slow* is a 503 with Retry-After,
 * never a request held open. PostgreSQL is bounded (connect timeout, statement timeout plus a
 * margin: test/ops/outage.test.ts, statement-timeout.test.ts); Redis, which every hot route's
 * rate limit asks, is bounded by REDIS_COMMAND_TIMEOUT_MS (src/http/rate-limit.ts), queued
 * commands too. Without it these requests got no answer at all (found by a review helper).
 */

/** The answer's status, or 'no answer' when none came within `ms`. */
async function statusWithin(ms: number, p: Promise<{ status: number }>): Promise<number | 'no answer'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'no answer'>((resolve) => { timer = setTimeout(() => resolve('no answer'), ms); });
  try {
    return await Promise.race([p.then((r) => r.status), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Well past the bound on a Redis command (2 s): no answer by then is a request held open. */
const PATIENCE_MS = 10_000;

describe.skipIf(!process.env.TEST_REDIS_URL)('Redis that stops answering', () => {
  const scenarios: Array<[string, (proxy: TcpProxy) => void | Promise<void>]> = [
    ['goes silent under its open connection (freeze)', (proxy) => proxy.freeze()],
    ['accepts connections but never answers (block)', (proxy) => proxy.block()],
  ];
  it.each(scenarios)('Redis %s: token issue and validation answer 503 instead of hanging', async (_name, stopAnswering) => {
    const target = new URL(process.env.TEST_REDIS_URL!);
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 6379) });
    const app = await startTestApp({ REDIS_URL: proxy.urlFor(process.env.TEST_REDIS_URL!) });
    try {
      const client = await makeClient(app);
      const user = await makeUser(app);
      const creds = { client_id: client.client_id, client_secret: client.client_secret };
      const url = await app.listen();
      const issued = await send(url, '/api/sso/token', { method: 'POST', body: { ...creds, username: user.username } });
      expect(issued.status, 'Redis answers: the limiter counts and the token is issued').toBe(200);

      await stopAnswering(proxy);
      const [issue, validate] = await Promise.all([
        statusWithin(PATIENCE_MS, send(url, '/api/sso/token', { method: 'POST', body: { ...creds, username: user.username } })),
        statusWithin(PATIENCE_MS, send(url, '/api/sso/validate', { method: 'POST', body: { ...creds, token: issued.body.token } })),
      ]);
      expect({ issue, validate }).toStrictEqual({ issue: 503, validate: 503 });
    } finally {
      await proxy.cut(); // drops the stuck connections, so the limiters' quit() is not left waiting for Redis
      await app.close();
      await proxy.close();
    }
  }, 60_000);
});
