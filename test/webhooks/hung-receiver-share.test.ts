import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, unique } from '../helpers/app.ts';
import { makeClient } from '../helpers/factories.ts';
import { adminHeaders, registerWebhook, sleep, startReceiver } from './receiver.ts';

/**
 * One receiver that never answers (a blackholed or hung endpoint) must not hold up the
 * deliveries of every other webhook: docs/webhooks.md "Events are sent within milliseconds", and
 * dispatcher.ts "Attempts in flight at once, so one slow receiver does not hold up the others".
 * With a backlog it took every slot (64), and the others waited for its timeouts (a review
 * helper); it now holds at most its share (SLOT_SHARE_PER_WEBHOOK).
 */
describe('a hung receiver with a backlog', () => {
  let app: TestApp;
  let hung: http.Server;
  let hungSeen = 0;
  beforeAll(async () => {
    app = await startTestApp({ WEBHOOK_TIMEOUT_MS: '15000', WEBHOOK_BACKOFF_MS: '60000' });
    hung = http.createServer((req) => { hungSeen++; req.resume(); /* never answers */ });
    await new Promise<void>((r) => hung.listen(0, '127.0.0.1', r));
  });
  afterAll(async () => {
    hung.closeAllConnections();
    hung.close();
    await app?.close();
  });

  it('does not delay another webhook\'s event by the hung receiver\'s timeout', async () => {
    const admin = await adminHeaders(app);
    const fast = await startReceiver();
    try {
      await registerWebhook(app, admin, { url: `http://127.0.0.1:${(hung.address() as AddressInfo).port}/hook`, events: ['user.login_failed'] });
      await registerWebhook(app, admin, { url: fast.url, events: ['client.registered'] });
      // 80 failed sign-ins (unknown names, so nothing locks): 80 deliveries to the hung receiver
      for (let i = 0; i < 80; i++) {
        const r = await app.http.post('/api/login', { username: unique('nobody'), password: 'wrong-password' });
        expect(r.status).toBe(401);
      }
      // half the dispatcher's 64 slots (SLOT_SHARE_PER_WEBHOOK), each held until the timeout
      const share = 32;
      const deadline = Date.now() + 3000;
      while (hungSeen < share && Date.now() < deadline) await sleep(20);
      await sleep(300);
      const held = hungSeen;
      // now an unrelated event for a healthy receiver
      const started = performance.now();
      await makeClient(app);
      await fast.waitFor(() => fast.of('client.registered').length === 1, 10_000);
      const latency = performance.now() - started;
      expect(latency, `client.registered reached the healthy receiver after ${latency.toFixed(0)} ms`).toBeLessThan(1000);
      expect(held, 'attempts the hung receiver holds').toBe(share);
    } finally {
      await fast.close();
    }
  }, 40_000);
});
