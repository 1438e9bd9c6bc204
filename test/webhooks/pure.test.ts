import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { thrownBy } from '../helpers/expect.ts';
import { classifyAddress, isAllowedAddress, parseWebhookUrl, resolveTarget, UrlNotAllowedError } from '../../src/webhooks/address-guard.ts';
import { hasRetriesLeft, MAX_ATTEMPTS, retryDelayMs } from '../../src/webhooks/backoff.ts';
import { signDelivery } from '../../src/webhooks/signing.ts';
import { verifyWebhook, WebhookVerificationError } from '../../src/webhooks/verify.ts';

const SECRET = 'unit-test-secret-0123456789';

describe('retry backoff', () => {
  it('waits the base, then four times longer each retry, within 10% jitter', () => {
    expect([1, 2, 3].map((n) => retryDelayMs(n, 100, () => 0.5))).toStrictEqual([100, 400, 1600]);
    expect(retryDelayMs(1, 100, () => 0)).toBe(90);
    expect(retryDelayMs(1, 100, () => 0.999999)).toBe(110);
    // even at the worst jitter each gap is longer than the one before
    expect(retryDelayMs(2, 100, () => 0) > retryDelayMs(1, 100, () => 0.999999)).toBeTruthy();
  });

  it('allows the first attempt and three retries, no more', () => {
    expect(MAX_ATTEMPTS).toBe(4);
    expect([1, 2, 3, 4].map(hasRetriesLeft)).toStrictEqual([true, true, true, false]);
  });
});

describe('delivery signing', () => {
  const delivery = { id: '6f1c3f8e-2f55-4c35-9a40-8f3b1d9a0c11', event: 'user.login', data: { user_id: 7 } };

  it('signs the exact body with hex HMAC-SHA256 and adds the Standard Webhooks headers', () => {
    const at = new Date('2026-01-02T03:04:05.678Z');
    const { body, headers } = signDelivery(delivery, SECRET, at);
    expect(JSON.parse(body)).toStrictEqual({ event: 'user.login', timestamp: '2026-01-02T03:04:05.678Z', data: { user_id: 7 } });
    expect(headers['X-AUTH-Signature']).toBe(createHmac('sha256', SECRET).update(body).digest('hex'));
    expect(headers['X-AUTH-Event']).toBe('user.login');
    expect(headers['X-AUTH-Delivery']).toBe(delivery.id);
    expect(headers['Content-Type']).toBe('application/json');
    expect(headers['webhook-id']).toBe(delivery.id);
    expect(headers['webhook-timestamp']).toBe(String(Math.floor(at.getTime() / 1000)));
    const standard = createHmac('sha256', SECRET).update(`${delivery.id}.${headers['webhook-timestamp']}.${body}`).digest('base64');
    expect(headers['webhook-signature']).toBe(`v1,${standard}`);
  });

  it('re-signs with a new timestamp on each attempt, keeping the delivery id', () => {
    const a = signDelivery(delivery, SECRET, new Date('2026-01-02T03:04:05Z'));
    const b = signDelivery(delivery, SECRET, new Date('2026-01-02T03:05:05Z'));
    expect(a.headers['X-AUTH-Signature']).not.toBe(b.headers['X-AUTH-Signature']);
    expect(a.headers['X-AUTH-Delivery']).toBe(b.headers['X-AUTH-Delivery']);
  });
});

describe('verifyWebhook', () => {
  const signed = () => signDelivery({ id: 'd1', event: 'user.locked', data: { user_id: 1 } }, SECRET);

  it('accepts a genuine delivery and returns its envelope (any header case, Headers objects too)', () => {
    const { body, headers } = signed();
    expect(verifyWebhook(body, headers, SECRET).event).toBe('user.locked');
    const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
    expect(verifyWebhook(Buffer.from(body), lower, SECRET).data.user_id).toBe(1);
    expect(verifyWebhook(body, new Headers(headers), SECRET).timestamp.endsWith('Z')).toBe(true);
  });

  const refuses = (fn: () => unknown, reason: string) =>
    expect(thrownBy(fn)).toSatisfy((e: unknown) => e instanceof WebhookVerificationError && e.reason === reason);

  it('refuses a body with one byte changed', () => {
    const { body, headers } = signed();
    const changed = body.replace('"user_id":1', '"user_id":2');
    expect(changed).not.toBe(body);
    refuses(() => verifyWebhook(changed, headers, SECRET), 'signature_mismatch');
  });

  it('refuses the wrong secret', () => {
    const { body, headers } = signed();
    refuses(() => verifyWebhook(body, headers, 'another-secret-0123456789'), 'signature_mismatch');
  });

  it('refuses a signature of the wrong length, a non-hex one, and a missing one', () => {
    const { body, headers } = signed();
    const sig = headers['X-AUTH-Signature'];
    refuses(() => verifyWebhook(body, { ...headers, 'X-AUTH-Signature': sig.slice(0, 62) }, SECRET), 'malformed_signature');
    refuses(() => verifyWebhook(body, { ...headers, 'X-AUTH-Signature': `${sig}00` }, SECRET), 'malformed_signature');
    refuses(() => verifyWebhook(body, { ...headers, 'X-AUTH-Signature': `${sig.slice(0, 63)}g` }, SECRET), 'malformed_signature');
    refuses(() => verifyWebhook(body, { ...headers, 'X-AUTH-Signature': '' }, SECRET), 'missing_signature');
    const { 'X-AUTH-Signature': _drop, ...without } = headers;
    refuses(() => verifyWebhook(body, without, SECRET), 'missing_signature');
  });

  it('refuses a body older (or further ahead) than the tolerance, accepts within it', () => {
    const at = new Date(Date.now() - 301_000);
    const old = signDelivery({ id: 'd2', event: 'user.login', data: {} }, SECRET, at);
    refuses(() => verifyWebhook(old.body, old.headers, SECRET), 'timestamp_out_of_tolerance');
    expect(verifyWebhook(old.body, old.headers, SECRET, { toleranceSeconds: 400 }).event).toBe('user.login');
    const ahead = signDelivery({ id: 'd3', event: 'user.login', data: {} }, SECRET, new Date(Date.now() + 301_000));
    refuses(() => verifyWebhook(ahead.body, ahead.headers, SECRET), 'timestamp_out_of_tolerance');
  });
});

describe('webhook address classification', () => {
  const block = { blockPrivate: true };

  it('refuses loopback, private, link-local, unique-local, CGNAT, unspecified and metadata addresses', () => {
    for (const [address, range] of [
      ['127.0.0.1', 'loopback'], ['127.255.0.9', 'loopback'], ['::1', 'loopback'],
      ['10.1.2.3', 'private'], ['172.16.0.1', 'private'], ['192.168.1.1', 'private'],
      ['169.254.1.1', 'linkLocal'], ['fe80::1', 'linkLocal'], ['fc00::1', 'uniqueLocal'], ['fd12:3456::1', 'uniqueLocal'],
      ['100.64.0.1', 'carrierGradeNat'], ['0.0.0.0', 'unspecified'], ['::', 'unspecified'],
      ['169.254.169.254', 'metadata'], ['fd00:ec2::254', 'metadata'],
      ['::ffff:127.0.0.1', 'loopback'], ['::ffff:7f00:1', 'loopback'], ['::ffff:169.254.169.254', 'metadata'], ['::ffff:10.0.0.1', 'private'],
      ['64:ff9b:1::a00:1', 'rfc6052'], ['224.0.0.1', 'multicast'], ['255.255.255.255', 'broadcast'],
    ]) {
      expect(classifyAddress(address), address).toBe(range);
      expect(isAllowedAddress(address, block), address).toBe(false);
    }
  });

  it('judges IPv4-compatible (::/96) and NAT64 (64:ff9b::/96) addresses by the IPv4 address they embed', () => {
    for (const [address, range] of [
      // the URL parser writes [::127.0.0.1] as [::7f00:1]; ipaddr.js alone calls these unicast
      ['::7f00:1', 'loopback'], ['::127.0.0.1', 'loopback'], ['::a9fe:a9fe', 'metadata'], ['::169.254.169.254', 'metadata'],
      ['::a00:1', 'private'], ['::c0a8:101', 'private'], ['::a9fe:101', 'linkLocal'], ['::6440:1', 'carrierGradeNat'], ['::2', 'unspecified'],
      // deprecated, never a real destination: refused even when the embedded address is public
      ['::808:808', 'ipv4Compatible'], ['::93.184.216.34', 'ipv4Compatible'],
      ['64:ff9b::7f00:1', 'loopback'], ['64:ff9b::127.0.0.1', 'loopback'], ['64:ff9b::a9fe:a9fe', 'metadata'], ['64:ff9b::a00:1', 'private'],
    ]) {
      expect(classifyAddress(address), address).toBe(range);
      expect(isAllowedAddress(address, block), address).toBe(false);
    }
    // NAT64 to a public IPv4 address is how an IPv6-only host with DNS64 reaches it
    expect(classifyAddress('64:ff9b::808:808')).toBe('unicast');
    expect(isAllowedAddress('64:ff9b::808:808', block)).toBe(true);
  });

  it('allows only global unicast 2000::/3 among IPv6 addresses ipaddr.js calls unicast', () => {
    for (const address of ['4000::1', '1000::1', 'e000::1', '::1:0:0:1', '0:0:0:1::1']) {
      expect(classifyAddress(address), address).toBe('notGlobalUnicast');
      expect(isAllowedAddress(address, block), address).toBe(false);
    }
    expect(isAllowedAddress('2a00:1450:4001:80b::200e', block)).toBe(true);
  });

  it('refuses IPv4-compatible spellings of loopback and metadata in URLs', async () => {
    for (const raw of ['http://[::127.0.0.1]:8080/hook', 'http://[::7f00:1]/', 'http://[::169.254.169.254]/', 'http://[::a9fe:a9fe]/',
      'http://[64:ff9b::127.0.0.1]/', 'http://[64:ff9b::a9fe:a9fe]/']) {
      await expect(resolveTarget(parseWebhookUrl(raw), block, async () => []), raw).rejects.toSatisfy((e: unknown) =>
        e instanceof UrlNotAllowedError && e.reason === 'private_address');
    }
  });

  it('allows public addresses, and everything when the guard is off', () => {
    for (const address of ['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8']) {
      expect(isAllowedAddress(address, block), address).toBe(true);
    }
    expect(isAllowedAddress('127.0.0.1', { blockPrivate: false })).toBe(true);
  });

  it('sees through numeric spellings of loopback in URLs', async () => {
    for (const raw of ['http://0x7f000001/', 'http://2130706433/', 'http://0177.0.0.1/', 'http://127.1/', 'http://[::ffff:127.0.0.1]/', 'http://[0:0:0:0:0:ffff:7f00:1]/']) {
      await expect(resolveTarget(parseWebhookUrl(raw), block, async () => []), raw).rejects.toSatisfy((e: unknown) =>
        e instanceof UrlNotAllowedError && e.reason === 'private_address');
    }
  });

  it('refuses a name when any of its addresses is private, and connects to the checked address', async () => {
    const url = parseWebhookUrl('https://hooks.example.com/in');
    await expect(resolveTarget(url, block, async () => [{ address: '93.184.216.34', family: 4 }, { address: '10.0.0.5', family: 4 }])).rejects.toThrow(UrlNotAllowedError);
    expect(await resolveTarget(url, block, async () => [{ address: '93.184.216.34', family: 4 }])).toStrictEqual({ address: '93.184.216.34', family: 4 });
    await expect(resolveTarget(url, block, async () => { throw new Error('ENOTFOUND'); })).rejects.toSatisfy((e: unknown) =>
      e instanceof UrlNotAllowedError && e.reason === 'unresolvable');
  });

  it('accepts only absolute http(s) URLs without credentials', () => {
    for (const raw of ['ftp://example.com/', 'file:///etc/passwd', 'javascript:alert(1)', '/relative', 'https://user:pw@example.com/']) {
      expect(() => parseWebhookUrl(raw), raw).toThrow(UrlNotAllowedError);
    }
    expect(parseWebhookUrl('https://example.com/hook?x=1').toString()).toBe('https://example.com/hook?x=1');
  });
});
