import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres } from '../../src/db/postgres.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase, onPostgres } from '../helpers/db.ts';
import { makeClient, makeUser } from '../helpers/factories.ts';

/**
 * A proxy in front of PostgreSQL that, once armed, drops the first reply of the server that
 * contains `marker` and cuts that connection: the statement ran (and, in autocommit, committed)
 * on the server, but its answer never reaches the service (an ambiguous commit).
 */
async function startDroppingProxy(target: { host: string; port: number }) {
  let marker: string | null = null;
  let dropped = false;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((inbound) => {
    const outbound = net.connect(target.port, target.host);
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.once('close', () => sockets.delete(s));
    }
    inbound.on('error', () => outbound.destroy());
    outbound.on('error', () => inbound.destroy());
    inbound.on('data', (c) => outbound.write(c));
    outbound.on('data', (c) => {
      if (marker && !dropped && c.includes(marker)) {
        dropped = true;
        inbound.destroy();
        outbound.destroy();
        return;
      }
      inbound.write(c);
    });
    inbound.once('close', () => outbound.destroy());
    outbound.once('close', () => inbound.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as net.AddressInfo).port;
  return {
    urlFor(url: string) { const u = new URL(url); u.hostname = '127.0.0.1'; u.port = String(port); return u.toString(); },
    arm(m: string) { marker = m; dropped = false; },
    get dropped() { return dropped; },
    close: () => new Promise<void>((r) => {
      server.close(() => r());
      for (const s of sockets) s.destroy();
    }),
  };
}

describe.skipIf(!onPostgres && 'PostgreSQL only')('an answer lost after the validations of a batch committed', () => {
  let t: Awaited<ReturnType<typeof createTestDatabase>>;
  let proxy: Awaited<ReturnType<typeof startDroppingProxy>>;
  let app: TestApp;
  beforeAll(async () => {
    t = await createTestDatabase();
    await t.db.close();
    const target = new URL(t.url!);
    proxy = await startDroppingProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const proxied = proxy.urlFor(t.url!);
    app = await startTestApp({}, { db: openPostgres(proxied), databaseUrl: proxied });
  });
  afterAll(async () => {
    await app?.close();
    await proxy?.close();
    await t?.drop();
  });

  it('never answers 401 token_already_used to the very validation that consumed the token', async () => {
    const client = await makeClient(app);
    const creds = { client_id: client.client_id, client_secret: client.client_secret };
    const a = await makeUser(app, { email: `lostanswer-a-${Date.now()}@example.com` });
    const b = await makeUser(app);
    // warm the client record cache: the validations' only statement is then the consume
    const warm = await app.http.post('/api/sso/token', { ...creds, username: b.username });
    expect((await app.http.post('/api/sso/validate', { ...creds, token: warm.body.token })).status).toBe(200);
    const ta = (await app.http.post('/api/sso/token', { ...creds, username: a.username })).body.token as string;
    const tb = (await app.http.post('/api/sso/token', { ...creds, username: b.username })).body.token as string;

    proxy.arm(a.email); // the consume statement's answer names a's email: it is lost after the commit
    // the two validations arrive together and share one statement (src/db/batch.ts)
    const answers = await Promise.all([
      app.http.post('/api/sso/validate', { ...creds, token: ta }),
      app.http.post('/api/sso/validate', { ...creds, token: tb }),
    ]);
    expect(proxy.dropped, 'the consume statement\'s answer was dropped').toBe(true);
    const used = await app.db.query<{ username: string; used: boolean }>(
      'SELECT username, used_at IS NOT NULL AS used FROM sso_tokens WHERE user_id = ANY($1) ORDER BY issued_at', [[a.id, b.id]]);
    const audit = await app.db.query<{ outcome: string; reason: string | null; user_id: number }>(
      "SELECT outcome, details->>'reason' AS reason, user_id FROM audit_log WHERE action = 'token.validate' AND user_id = $1 ORDER BY id", [a.id]);
    // what actually happened: the token was consumed by this validation (its success row is in the audit log)
    expect(used.rows.find((r) => r.username === a.username)?.used).toBe(true);
    // the answer must not claim someone else used it: 200 or an honest 503, never a 401 replay verdict
    expect(answers[0].body.error, answers[0].text).not.toBe('token_already_used');
    // its answer was lost: it cannot say what happened (docs/fail-safe.md, "Clients")
    expect(answers[0].status).toBe(503);
    expect(audit.rows.filter((r) => r.reason === 'token_already_used'), 'no replay recorded for a first use').toStrictEqual([]);
  });

  it('answers token issues whose batch statement committed but lost its answer with 503, not a 500 bug', async () => {
    const client = await makeClient(app);
    const creds = { client_id: client.client_id, client_secret: client.client_secret };
    const a = await makeUser(app, { email: `lostissue-a-${Date.now()}@example.com` });
    const b = await makeUser(app);
    expect((await app.http.post('/api/sso/token', { ...creds, username: b.username })).status).toBe(200); // cache warm
    proxy.arm(a.email);
    const answers = await Promise.all([
      app.http.post('/api/sso/token', { ...creds, username: a.username }),
      app.http.post('/api/sso/token', { ...creds, username: b.username }),
    ]);
    expect(proxy.dropped).toBe(true);
    const rows = await app.db.query<{ n: number }>('SELECT count(*)::int AS n FROM sso_tokens WHERE user_id = $1', [a.id]);
    for (const r of answers) expect([200, 503], r.text).toContain(r.status);
    expect(rows.rows[0].n, 'one token row, written by the statement whose answer was lost').toBe(1);
  });
});
