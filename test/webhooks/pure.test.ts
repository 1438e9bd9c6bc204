import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, it } from 'node:test';
import { classifyAddress, isAllowedAddress, parseWebhookUrl, resolveTarget, UrlNotAllowedError } from '../../src/webhooks/address-guard.ts';
import { hasRetriesLeft, MAX_ATTEMPTS, retryDelayMs } from '../../src/webhooks/backoff.ts';
import { signDelivery } from '../../src/webhooks/signing.ts';
import { verifyWebhook, WebhookVerificationError } from '../../src/webhooks/verify.ts';

const SECRET = 'unit-test-secret-0123456789';

describe('retry backoff', () => {
  it('waits the base, then four times longer each retry, within 10% jitter', () => {
    assert.deepEqual([1, 2, 3].map((n) => retryDelayMs(n, 100, () => 0.5)), [100, 400, 1600]);
    assert.equal(retryDelayMs(1, 100, () => 0), 90);
    assert.equal(retryDelayMs(1, 100, () => 0.999999), 110);
    // even at the worst jitter each gap is longer than the one before
    assert.ok(retryDelayMs(2, 100, () => 0) > retryDelayMs(1, 100, () => 0.999999));
  });

  it('allows the first attempt and three retries, no more', () => {
    assert.equal(MAX_ATTEMPTS, 4);
    assert.deepEqual([1, 2, 3, 4].map(hasRetriesLeft), [true, true, true, false]);
  });
});

describe('delivery signing', () => {
  const delivery = { id: '6f1c3f8e-2f55-4c35-9a40-8f3b1d9a0c11', event: 'user.login', data: { user_id: 7 } };

  it('signs the exact body with hex HMAC-SHA256 and adds the Standard Webhooks headers', () => {
    const at = new Date('2026-01-02T03:04:05.678Z');
    const { body, headers } = signDelivery(delivery, SECRET, at);
    assert.deepEqual(JSON.parse(body), { event: 'user.login', timestamp: '2026-01-02T03:04:05.678Z', data: { user_id: 7 } });
    assert.equal(headers['X-AUTH-Signature'], createHmac('sha256', SECRET).update(body).digest('hex'));
    assert.equal(headers['X-AUTH-Event'], 'user.login');
    assert.equal(headers['X-AUTH-Delivery'], delivery.id);
    assert.equal(headers['Content-Type'], 'application/json');
    assert.equal(headers['webhook-id'], delivery.id);
    assert.equal(headers['webhook-timestamp'], String(Math.floor(at.getTime() / 1000)));
    const standard = createHmac('sha256', SECRET).update(`${delivery.id}.${headers['webhook-timestamp']}.${body}`).digest('base64');
    assert.equal(headers['webhook-signature'], `v1,${standard}`);
  });

  it('re-signs with a new timestamp on each attempt, keeping the delivery id', () => {
    const a = signDelivery(delivery, SECRET, new Date('2026-01-02T03:04:05Z'));
    const b = signDelivery(delivery, SECRET, new Date('2026-01-02T03:05:05Z'));
    assert.notEqual(a.headers['X-AUTH-Signature'], b.headers['X-AUTH-Signature']);
    assert.equal(a.headers['X-AUTH-Delivery'], b.headers['X-AUTH-Delivery']);
  });
});

describe('verifyWebhook', () => {
  const signed = () => signDelivery({ id: 'd1', event: 'user.locked', data: { user_id: 1 } }, SECRET);

  it('accepts a genuine delivery and returns its envelope (any header case, Headers objects too)', () => {
    const { body, headers } = signed();
    assert.equal(verifyWebhook(body, headers, SECRET).event, 'user.locked');
    const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
    assert.equal(verifyWebhook(Buffer.from(body), lower, SECRET).data.user_id, 1);
    assert.equal(verifyWebhook(body, new Headers(headers), SECRET).timestamp.endsWith('Z'), true);
  });

  const refuses = (fn: () => unknown, reason: string) =>
    assert.throws(fn, (e: unknown) => e instanceof WebhookVerificationError && e.reason === reason);

  it('refuses a body with one byte changed', () => {
    const { body, headers } = signed();
    const changed = body.replace('"user_id":1', '"user_id":2');
    assert.notEqual(changed, body);
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
    assert.equal(verifyWebhook(old.body, old.headers, SECRET, { toleranceSeconds: 400 }).event, 'user.login');
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
      assert.equal(classifyAddress(address), range, address);
      assert.equal(isAllowedAddress(address, block), false, address);
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
      assert.equal(classifyAddress(address), range, address);
      assert.equal(isAllowedAddress(address, block), false, address);
    }
    // NAT64 to a public IPv4 address is how an IPv6-only host with DNS64 reaches it
    assert.equal(classifyAddress('64:ff9b::808:808'), 'unicast');
    assert.equal(isAllowedAddress('64:ff9b::808:808', block), true);
  });

  it('allows only global unicast 2000::/3 among IPv6 addresses ipaddr.js calls unicast', () => {
    for (const address of ['4000::1', '1000::1', 'e000::1', '::1:0:0:1', '0:0:0:1::1']) {
      assert.equal(classifyAddress(address), 'notGlobalUnicast', address);
      assert.equal(isAllowedAddress(address, block), false, address);
    }
    assert.equal(isAllowedAddress('2a00:1450:4001:80b::200e', block), true);
  });

  it('refuses IPv4-compatible spellings of loopback and metadata in URLs', async () => {
    for (const raw of ['http://[::127.0.0.1]:8080/hook', 'http://[::7f00:1]/', 'http://[::169.254.169.254]/', 'http://[::a9fe:a9fe]/',
      'http://[64:ff9b::127.0.0.1]/', 'http://[64:ff9b::a9fe:a9fe]/']) {
      await assert.rejects(resolveTarget(parseWebhookUrl(raw), block, async () => []), (e: unknown) =>
        e instanceof UrlNotAllowedError && e.reason === 'private_address', raw);
    }
  });

  it('allows public addresses, and everything when the guard is off', () => {
    for (const address of ['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8']) {
      assert.equal(isAllowedAddress(address, block), true, address);
    }
    assert.equal(isAllowedAddress('127.0.0.1', { blockPrivate: false }), true);
  });

  it('sees through numeric spellings of loopback in URLs', async () => {
    for (const raw of ['http://0x7f000001/', 'http://2130706433/', 'http://0177.0.0.1/', 'http://127.1/', 'http://[::ffff:127.0.0.1]/', 'http://[0:0:0:0:0:ffff:7f00:1]/']) {
      await assert.rejects(resolveTarget(parseWebhookUrl(raw), block, async () => []), (e: unknown) =>
        e instanceof UrlNotAllowedError && e.reason === 'private_address', raw);
    }
  });

  it('refuses a name when any of its addresses is private, and connects to the checked address', async () => {
    const url = parseWebhookUrl('https://hooks.example.com/in');
    await assert.rejects(
      resolveTarget(url, block, async () => [{ address: '93.184.216.34', family: 4 }, { address: '10.0.0.5', family: 4 }]),
      UrlNotAllowedError,
    );
    assert.deepEqual(await resolveTarget(url, block, async () => [{ address: '93.184.216.34', family: 4 }]), { address: '93.184.216.34', family: 4 });
    await assert.rejects(resolveTarget(url, block, async () => { throw new Error('ENOTFOUND'); }), (e: unknown) =>
      e instanceof UrlNotAllowedError && e.reason === 'unresolvable');
  });

  it('accepts only absolute http(s) URLs without credentials', () => {
    for (const raw of ['ftp://example.com/', 'file:///etc/passwd', 'javascript:alert(1)', '/relative', 'https://user:pw@example.com/']) {
      assert.throws(() => parseWebhookUrl(raw), UrlNotAllowedError, raw);
    }
    assert.equal(parseWebhookUrl('https://example.com/hook?x=1').toString(), 'https://example.com/hook?x=1');
  });
});
