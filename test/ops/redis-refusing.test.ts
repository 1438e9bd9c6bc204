import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';
import { freePort, send } from '../helpers/http.ts';

/*
 * docs/fail-safe.md: "Outages are 503, bugs are 500". PostgreSQL's "cannot serve now" states
 * are outages (a read-only standby after a failover, SQLSTATE 25006, among them), and so are
 * Redis's (src/http/unavailable.ts); before, they were not recognised: a Redis that refuses writes because it was demoted to a replica (READONLY,
 * a failover) or is out of memory (OOM) turned every hot route into a 500 internal_error,
 * logged as a bug, without Retry-After (found by a review helper).
 *
 * Runs a Redis of its own (redis-server on a free port), so the shared one is never touched.
 */
/** This test runs a Redis of its own; a machine whose Redis is not installed as a command skips it. */
const hasRedisServer = spawnSync('redis-server', ['--version']).status === 0;

describe.runIf(hasRedisServer)('a Redis that refuses writes', () => {
  let redis: ChildProcess;
  let port: number;
  let app: TestApp;
  let url: string;
  let creds: { client_id: string; client_secret: string };
  let username: string;
  const cli = (...args: string[]) => execFileSync('redis-cli', ['-p', String(port), ...args]).toString().trim();

  beforeAll(async () => {
    port = await freePort();
    redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    for (let i = 0; i < 50; i++) {
      try {
        if (cli('ping') === 'PONG') break;
      } catch { /* not up yet */ }
      await new Promise((r) => setTimeout(r, 100));
    }
    app = await startTestApp({ REDIS_URL: `redis://127.0.0.1:${port}` });
    const client = await makeClient(app);
    creds = { client_id: client.client_id, client_secret: client.client_secret };
    username = (await makeUser(app)).username;
    url = await app.listen();
  });
  afterAll(async () => {
    await app?.close();
    redis?.kill();
  });

  const calls = async () => {
    const issued = await send(url, '/api/sso/token', { method: 'POST', body: { ...creds, username } });
    const validated = await send(url, '/api/sso/validate', { method: 'POST', body: { ...creds, token: 'not-a-jwt' } });
    const badSecret = await send(url, '/api/sso/validate', { method: 'POST', body: { ...creds, client_secret: 'wrong', token: 'not-a-jwt' } });
    return [issued, validated, badSecret].map((r) => ({ status: r.status, error: r.body?.error, retryAfter: r.headers['retry-after'] !== undefined }));
  };

  it('answers normally while Redis accepts writes', async () => {
    expect((await calls()).map((c) => c.status)).toStrictEqual([200, 401, 401]);
  });

  const outage = { status: 503, error: 'service_unavailable', retryAfter: true };

  it('answers 503 service_unavailable with Retry-After when Redis was demoted to a read-only replica (failover)', async () => {
    cli('REPLICAOF', '127.0.0.1', String(await freePort()));
    try {
      expect(await calls()).toStrictEqual([outage, outage, outage]);
    } finally {
      cli('REPLICAOF', 'NO', 'ONE');
    }
  });

  it('answers 503 service_unavailable with Retry-After when Redis is out of memory', async () => {
    cli('CONFIG', 'SET', 'maxmemory', '1');
    try {
      expect(await calls()).toStrictEqual([outage, outage, outage]);
    } finally {
      cli('CONFIG', 'SET', 'maxmemory', '0');
    }
  });
});
