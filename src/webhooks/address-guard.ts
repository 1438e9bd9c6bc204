import dns from 'node:dns/promises';
import ipaddr from 'ipaddr.js';

/**
 * SSRF protection for webhook URLs. A webhook makes this service send requests to an
 * address an administrator typed in; in production it must not reach the service's own
 * network (databases, the cloud metadata endpoint, admin ports on loopback). Only global
 * unicast addresses pass: everything ipaddr.js files under a special range (loopback,
 * private, link-local, unique-local, CGNAT, unspecified, multicast, reserved, 6to4/Teredo
 * tunnels, ...) is refused, and so is any IPv6 address outside global unicast 2000::/3.
 * IPv6 spellings of IPv4 addresses are judged by the IPv4 address they embed:
 * - IPv4-mapped ::ffff:a.b.c.d is judged as a.b.c.d;
 * - NAT64 64:ff9b::a.b.c.d (RFC 6052 well-known prefix) reaches a.b.c.d through the
 *   translator, so it is judged as a.b.c.d (a public one passes, as DNS64 hands them out);
 * - the deprecated IPv4-compatible ::a.b.c.d (::/96 other than :: and ::1; the URL parser
 *   writes [::127.0.0.1] as [::7f00:1], which ipaddr.js calls unicast) is always refused,
 *   named after the embedded address's range when that is special ('loopback', 'metadata').
 */

/** How the guard is configured: on in production unless WEBHOOK_ALLOW_PRIVATE=true. */
export interface GuardPolicy {
  blockPrivate: boolean;
}

/** The policy for a configuration. */
export function guardPolicy(config: { NODE_ENV: string; WEBHOOK_ALLOW_PRIVATE?: boolean }): GuardPolicy {
  return { blockPrivate: config.NODE_ENV === 'production' && config.WEBHOOK_ALLOW_PRIVATE !== true };
}

/** Metadata endpoints named explicitly so the reason reads well (both are also non-unicast). */
const METADATA = new Set(['169.254.169.254', 'fd00:ec2::254']);

/**
 * The range an address belongs to: `'unicast'` for a public address, otherwise the name of
 * the special range (`'loopback'`, `'private'`, `'metadata'`, ...), or `'invalid'`.
 */
export function classifyAddress(address: string): string {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    // process() folds ::ffff:a.b.c.d to IPv4, so a mapped loopback is judged as loopback.
    parsed = ipaddr.process(canonicalIPv6(address.replace(/^\[|\]$/g, '')));
  } catch {
    return 'invalid';
  }
  if (METADATA.has(parsed.toString())) return 'metadata';
  if (parsed.kind() === 'ipv4') return parsed.range();
  const v6 = parsed as ipaddr.IPv6;
  const range = v6.range();
  if (range === 'unspecified' || range === 'loopback') return range;
  if (v6.match(NAT64_WELL_KNOWN)) return classifyAddress(embeddedIPv4(v6));
  if (v6.match(IPV4_COMPATIBLE)) {
    const embedded = classifyAddress(embeddedIPv4(v6));
    return embedded === 'unicast' ? 'ipv4Compatible' : embedded;
  }
  if (range === 'unicast' && !v6.match(GLOBAL_UNICAST)) return 'notGlobalUnicast';
  return range;
}

/** 64:ff9b::/96, the NAT64 well-known prefix: the last 32 bits are the IPv4 destination. */
const NAT64_WELL_KNOWN = ipaddr.IPv6.parseCIDR('64:ff9b::/96');
/** ::/96, the deprecated IPv4-compatible addresses (:: and ::1 are taken out before). */
const IPV4_COMPATIBLE = ipaddr.IPv6.parseCIDR('::/96');
/** 2000::/3, the only IPv6 block allocated for global unicast. */
const GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR('2000::/3');

/**
 * An IPv6 address as the WHATWG URL parser writes it (hex groups only), anything else as it
 * is. ipaddr.js reads the dotted form `::a.b.c.d` as the IPv4-mapped `::ffff:a.b.c.d`, but it
 * is the IPv4-compatible `::a.b.c.d`, and that is how the resolver prints such addresses.
 */
function canonicalIPv6(address: string): string {
  if (!address.includes(':') || !address.includes('.')) return address;
  try {
    return new URL(`http://[${address}]/`).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return address;
  }
}

/** The IPv4 address in the last 32 bits of an IPv6 address, dotted. */
function embeddedIPv4(v6: ipaddr.IPv6): string {
  return v6.toByteArray().slice(12).join('.');
}

/** Whether a request to `address` is allowed under `policy`. */
export function isAllowedAddress(address: string, policy: GuardPolicy): boolean {
  const range = classifyAddress(address);
  if (range === 'invalid') return false;
  return !policy.blockPrivate || range === 'unicast';
}

/** A URL that cannot be used as a webhook target, with the reason. */
export class UrlNotAllowedError extends Error {
  constructor(message: string, readonly reason: 'invalid_url' | 'private_address' | 'unresolvable') {
    super(message);
  }
}

/**
 * Parses a webhook URL: absolute http(s), no credentials (they would be shown in listings).
 * The WHATWG parser canonicalizes numeric host spellings (0x7f000001, 2130706433, 0177.0.0.1
 * all become 127.0.0.1), so the address checks below see the real address.
 */
export function parseWebhookUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UrlNotAllowedError('url must be an absolute http(s) URL', 'invalid_url');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UrlNotAllowedError('url must use http or https', 'invalid_url');
  }
  if (url.username || url.password) {
    throw new UrlNotAllowedError('url must not contain credentials; the signing secret authenticates deliveries', 'invalid_url');
  }
  return url;
}

/** One resolved address, as net.connect wants it. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

export type Lookup = (hostname: string) => Promise<ResolvedAddress[]>;

/** The system resolver (getaddrinfo, like every other connection the process makes). */
export const systemLookup: Lookup = async (hostname) =>
  (await dns.lookup(hostname, { all: true, verbatim: true })).map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));

/**
 * Resolves the URL's host and returns the address to connect to. Under a blocking policy
 * every address the name resolves to must be public (a name with one private address among
 * public ones is refused: the resolver may hand out either). The caller connects to exactly
 * the returned address, so a second, different DNS answer (rebinding) cannot slip through.
 */
export async function resolveTarget(url: URL, policy: GuardPolicy, lookup: Lookup = systemLookup): Promise<ResolvedAddress> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: ResolvedAddress[];
  if (ipaddr.isValid(host)) {
    addresses = [{ address: host, family: host.includes(':') ? 6 : 4 }];
  } else {
    try {
      addresses = await lookup(host);
    } catch {
      throw new UrlNotAllowedError(`The host ${host} could not be resolved`, 'unresolvable');
    }
    if (addresses.length === 0) throw new UrlNotAllowedError(`The host ${host} could not be resolved`, 'unresolvable');
  }
  const refused = addresses.find((a) => !isAllowedAddress(a.address, policy));
  if (refused) {
    throw new UrlNotAllowedError(
      `The host ${host} is a ${classifyAddress(refused.address)} address; webhooks may only reach public addresses`,
      'private_address',
    );
  }
  return addresses[0];
}
