import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makeClient } from '../helpers/factories.ts';
import { adminHeaders, eventually, registerWebhook, sleep } from './receiver.ts';

/**
 * "Any 2xx answer within WEBHOOK_TIMEOUT_MS is success" (docs/webhooks.md): a receiver that answers 200 at
 * once and then streams its body slowly (below the 4 KiB cap) has delivered the event; its
 * delivery was counted as a timeout and sent again, four times (a review helper).
 */
describe('a receiver that answers 200 at once and then trickles its body', () => {
  let app: TestApp;
  let server: http.Server;
  let requests = 0;
  const timers = new Set<NodeJS.Timeout>();
  beforeAll(async () => {
    app = await startTestApp({ WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_BACKOFF_MS: '10' });
    server = http.createServer((req, res) => {
      requests++;
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('accepted');
        const t = setInterval(() => res.write('.'), 200); // keeps the response open, a byte at a time
        timers.add(t);
        res.on('close', () => clearInterval(t));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  });
  afterAll(async () => {
    for (const t of timers) clearInterval(t);
    server.closeAllConnections();
    server.close();
    await app?.close();
  });

  it('counts the 200 as delivered, once', async () => {
    const admin = await adminHeaders(app);
    const id = await registerWebhook(app, admin, { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, events: ['client.registered'] });
    await makeClient(app);
    await eventually(async () => (await app.db.query("SELECT 1 FROM webhook_deliveries WHERE webhook_id = $1 AND status <> 'pending'", [id])).rows.length === 1, 20_000);
    await sleep(200);
    const row = (await app.db.query<{ status: string; attempts: number; last_status_code: number | null; last_error: string | null }>(
      'SELECT status, attempts, last_status_code, last_error FROM webhook_deliveries WHERE webhook_id = $1', [id])).rows[0];
    expect({ ...row, requests }).toStrictEqual({ status: 'succeeded', attempts: 1, last_status_code: 200, last_error: null, requests: 1 });
  }, 30_000);
});
