import { describe, expect, it } from 'vitest';
import { InvalidAllowListEntry, isIpAllowed, normalizeAllowListEntry } from '../../src/clients/allowlist.ts';

describe('allow-list entries (pure logic)', () => {
  it('normalizes addresses and ranges', () => {
    expect(normalizeAllowListEntry(' 10.1.2.3 ')).toBe('10.1.2.3');
    expect(normalizeAllowListEntry('10.1.2.3/8')).toBe('10.0.0.0/8');
    expect(normalizeAllowListEntry('2001:DB8::1')).toBe('2001:db8::1');
    expect(normalizeAllowListEntry('2001:db8::1/32')).toBe('2001:db8::/32');
    expect(normalizeAllowListEntry('::ffff:192.0.2.1')).toBe('192.0.2.1');
    expect(normalizeAllowListEntry('::ffff:192.0.2.0/120')).toBe('192.0.2.0/24');
  });

  it('refuses what is not an address or range', () => {
    for (const bad of ['', 'localhost', '10.0.0.0/33', '::/129', '1.2.3', '0x7f000001', '127.1', '300.1.1.1', '10.0.0.1/x',
      // spellings ipaddr.js would read as another network
      '192.168.001.010/32', '010.0.0.0/8', '0x0a.0.0.0/8', '10.1/16', '2130706433/32', '10.0.0.010', '10.0.0.0/08', '10.0.0.0/+8']) {
      expect(() => normalizeAllowListEntry(bad), bad).toThrow(InvalidAllowListEntry);
    }
  });

  it('matches IPv4, IPv6 and IPv4-mapped callers', () => {
    const list = ['10.0.0.0/8', '192.0.2.7', '2001:db8::/32'];
    expect(isIpAllowed('10.200.1.1', list)).toBe(true);
    expect(isIpAllowed('11.0.0.1', list)).toBe(false);
    expect(isIpAllowed('192.0.2.7', list)).toBe(true);
    expect(isIpAllowed('192.0.2.8', list)).toBe(false);
    expect(isIpAllowed('2001:db8:1::5', list)).toBe(true);
    expect(isIpAllowed('2001:db9::5', list)).toBe(false);
    expect(isIpAllowed('::ffff:10.1.1.1', list)).toBe(true);
    expect(isIpAllowed('garbage', list)).toBe(false);
    expect(isIpAllowed('10.0.0.1', [])).toBe(false);
  });

  it('admits an IPv4 caller by an IPv6 range wider than /96 that holds the IPv4-mapped space, and only by such a one', () => {
    expect(isIpAllowed('203.0.113.9', ['::/0'])).toBe(true);
    expect(isIpAllowed('203.0.113.9', ['::/64'])).toBe(true);
    expect(isIpAllowed('203.0.113.9', ['::ffff:0:0/95'])).toBe(true);
    expect(isIpAllowed('203.0.113.9', ['2001:db8::/32'])).toBe(false);
    expect(isIpAllowed('203.0.113.9', ['::1'])).toBe(false);
    expect(isIpAllowed('203.0.113.9', ['64:ff9b::/96'])).toBe(false); // NAT64 is not the mapped space
    expect(isIpAllowed('2001:db8::1', ['0.0.0.0/0']), 'an IPv4 range admits no IPv6 caller').toBe(false);
  });

  it('answers each list for itself, however many times and callers it is asked about (its answers are remembered)', () => {
    const narrow = ['10.0.0.0/16'];
    const wide = ['10.0.0.0/8'];
    const sameEntries = ['10.0.0.0/16'];
    const addresses = Array.from({ length: 2500 }, (_, i) => `10.${(i >> 8) & 255}.${i & 255}.1`);
    expect(new Set(addresses).size, 'more distinct callers than answers kept per list').toBe(2500);
    for (let round = 0; round < 2; round++) {
      for (const [i, ip] of addresses.entries()) {
        expect(isIpAllowed(ip, narrow), ip).toBe(i < 256);
        expect(isIpAllowed(ip, wide), ip).toBe(true);
        expect(isIpAllowed(ip, sameEntries), ip).toBe(i < 256);
      }
    }
    expect(isIpAllowed('11.0.0.1', wide)).toBe(false);
    const long = `${'x'.repeat(100)}10.0.0.1`; // never an address, however often asked
    expect(isIpAllowed(long, wide)).toBe(false);
    expect(isIpAllowed(long, wide)).toBe(false);
  });
});
