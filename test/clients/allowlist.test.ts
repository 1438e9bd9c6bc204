import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidAllowListEntry, isIpAllowed, normalizeAllowListEntry } from '../../src/clients/allowlist.ts';

describe('allow-list entries (pure logic)', () => {
  it('normalizes addresses and ranges', () => {
    assert.equal(normalizeAllowListEntry(' 10.1.2.3 '), '10.1.2.3');
    assert.equal(normalizeAllowListEntry('10.1.2.3/8'), '10.0.0.0/8');
    assert.equal(normalizeAllowListEntry('2001:DB8::1'), '2001:db8::1');
    assert.equal(normalizeAllowListEntry('2001:db8::1/32'), '2001:db8::/32');
    assert.equal(normalizeAllowListEntry('::ffff:192.0.2.1'), '192.0.2.1');
    assert.equal(normalizeAllowListEntry('::ffff:192.0.2.0/120'), '192.0.2.0/24');
  });

  it('refuses what is not an address or range', () => {
    for (const bad of ['', 'localhost', '10.0.0.0/33', '::/129', '1.2.3', '0x7f000001', '127.1', '300.1.1.1', '10.0.0.1/x',
      // spellings ipaddr.js would read as another network
      '192.168.001.010/32', '010.0.0.0/8', '0x0a.0.0.0/8', '10.1/16', '2130706433/32', '10.0.0.010', '10.0.0.0/08', '10.0.0.0/+8']) {
      assert.throws(() => normalizeAllowListEntry(bad), InvalidAllowListEntry, bad);
    }
  });

  it('matches IPv4, IPv6 and IPv4-mapped callers', () => {
    const list = ['10.0.0.0/8', '192.0.2.7', '2001:db8::/32'];
    assert.equal(isIpAllowed('10.200.1.1', list), true);
    assert.equal(isIpAllowed('11.0.0.1', list), false);
    assert.equal(isIpAllowed('192.0.2.7', list), true);
    assert.equal(isIpAllowed('192.0.2.8', list), false);
    assert.equal(isIpAllowed('2001:db8:1::5', list), true);
    assert.equal(isIpAllowed('2001:db9::5', list), false);
    assert.equal(isIpAllowed('::ffff:10.1.1.1', list), true);
    assert.equal(isIpAllowed('garbage', list), false);
    assert.equal(isIpAllowed('10.0.0.1', []), false);
  });
});
