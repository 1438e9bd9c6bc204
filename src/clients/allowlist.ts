import ipaddr from 'ipaddr.js';
import { couldBeAddress, ownCopy } from '../http/client-ip.ts';

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** An allow-list entry that is neither an IP address nor a CIDR range. */
export class InvalidAllowListEntry extends Error {
  constructor(readonly entry: string) {
    super(`"${entry}" is not an IP address or CIDR range`);
  }
}

/**
 * Canonical form of one allow-list entry: an address ("10.0.0.7", "2001:db8::1") or a CIDR
 * range with its host bits cleared ("10.0.0.0/8"). IPv4-mapped IPv6 is folded to IPv4.
 * Throws InvalidAllowListEntry for anything else (so bad entries are refused when saved).
 */
export function normalizeAllowListEntry(raw: string): string {
  const entry = raw.trim();
  try {
    if (entry.includes('/')) {
      assertPlainAddress(entry.slice(0, entry.indexOf('/')));
      if (!/^\/(0|[1-9]\d{0,2})$/.test(entry.slice(entry.indexOf('/')))) throw new Error('bad prefix length');
      const [addr, bits] = ipaddr.parseCIDR(entry);
      if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
        const v4 = (addr as ipaddr.IPv6).toIPv4Address();
        return `${ipaddr.IPv4.networkAddressFromCIDR(`${v4}/${bits - 96}`)}/${bits - 96}`;
      }
      const network = addr.kind() === 'ipv4'
        ? ipaddr.IPv4.networkAddressFromCIDR(entry)
        : ipaddr.IPv6.networkAddressFromCIDR(entry);
      return `${network.toString()}/${bits}`;
    }
    assertPlainAddress(entry);
    return ipaddr.process(entry).toString();
  } catch {
    throw new InvalidAllowListEntry(raw);
  }
}

/**
 * Accepts only the spellings people mean: IPv6 in hex groups, IPv4 as four decimal parts
 * without leading zeros. ipaddr.js also takes "0x7f.1", "127.1", "2130706433" and reads
 * "010" as octal, which would silently admit another network.
 */
function assertPlainAddress(addr: string): void {
  if (!ipaddr.isValid(addr) || !/^[0-9a-fA-F.:]+$/.test(addr)) throw new Error('not an address');
  if (!addr.includes(':') && !ipaddr.IPv4.isValidFourPartDecimal(addr)) throw new Error('not dotted-quad');
}

/** Whether `text` is one IP address written as `assertPlainAddress` accepts it (no range). */
export function isPlainAddress(text: string): boolean {
  try {
    assertPlainAddress(text);
    return true;
  } catch {
    return false;
  }
}

/** Normalizes a whole list; collects every bad entry so a caller can name them all. */
export function normalizeAllowList(entries: string[]): { entries: string[]; invalid: string[] } {
  const out = new Set<string>();
  const invalid: string[] = [];
  for (const e of entries) {
    try {
      out.add(normalizeAllowListEntry(e));
    } catch {
      invalid.push(e);
    }
  }
  return { entries: [...out], invalid };
}

/** True when a range admits every address of its family (0.0.0.0/0, ::/0). */
export function isAllowEverything(entry: string): boolean {
  return /\/0$/.test(entry);
}

const compiled = new Map<string, Range[]>();

function compile(entries: readonly string[]): Range[] {
  const key = entries.join(',');
  let ranges = compiled.get(key);
  if (!ranges) {
    ranges = entries.flatMap(toRange);
    if (compiled.size > 1000) compiled.clear();
    compiled.set(key, ranges);
  }
  return ranges;
}

/**
 * The range of one stored entry; none for an entry that does not parse. The database refuses
 * such rows (migrations/0002_clients_as_sql.sql), but a row must never turn a request into a
 * 500: an unreadable entry admits nobody.
 */
function toRange(entry: string): Range[] {
  try {
    return [(entry.includes('/') ? ipaddr.parseCIDR(entry) : [ipaddr.parse(entry), entry.includes(':') ? 128 : 32]) as Range];
  } catch {
    return [];
  }
}

/**
 * The answers given for each allow list, by the list (a client record's own array, kept with
 * the record in src/clients/cache.ts) and then by address: a hot route asks for every request,
 * mostly from the same few callers, and parsing the address took more than the rest of the
 * check (about 2 µs of a validation's 150). A new record brings a new array, hence new answers.
 */
const verdicts = new WeakMap<readonly string[], Map<string, boolean>>();
const VERDICTS_PER_LIST = 1000;

/** Whether `ip` (already normalized) is inside one of the stored allow-list entries. */
export function isIpAllowed(ip: string, entries: readonly string[]): boolean {
  if (!Array.isArray(entries) || entries.length === 0) return false;
  let known = verdicts.get(entries);
  if (!known) verdicts.set(entries, (known = new Map()));
  let allowed = known.get(ip);
  if (allowed === undefined) {
    allowed = matchesAny(ip, entries);
    if (!couldBeAddress(ip)) return allowed; // never an address: nothing to remember
    if (known.size >= VERDICTS_PER_LIST) known.clear(); // many callers: answers are worked out again
    known.set(ownCopy(ip), allowed); // a copy: `ip` may be a piece of a large header
  }
  return allowed;
}

function matchesAny(ip: string, entries: readonly string[]): boolean {
  if (!ipaddr.isValid(ip)) return false;
  const addr = ipaddr.process(ip);
  // An IPv4 caller is also the IPv4-mapped IPv6 address ::ffff:a.b.c.d (how a dual-stack
  // socket shows it). A range of /96 or longer in that space is stored as IPv4
  // (normalizeAllowListEntry); a wider IPv6 range holding it (::/0, ::/64, ::ffff:0:0/95)
  // admits IPv4 callers as well.
  const mapped = addr.kind() === 'ipv4' ? (addr as ipaddr.IPv4).toIPv4MappedAddress() : null;
  return compile(entries).some(([net, bits]) =>
    net.kind() === addr.kind() ? addr.match(net, bits) : mapped !== null && bits < 96 && mapped.match(net as ipaddr.IPv6, bits));
}
