import dns from 'node:dns/promises';
import ipaddr from 'ipaddr.js';

/**
 * SSRF protection for webhook URLs. A webhook makes this service send requests to an
 * address an administrator typed in; in production it must not reach the service's own
 * network (databases, the cloud metadata endpoint, admin ports on loopback). Only global
 * unicast addresses pass: everything ipaddr.js files under a special range (loopback,
 * private, link-local, unique-local, CGNAT, unspecified, multicast, reserved, NAT64,
 * 6to4/Teredo tunnels, ...) is refused, and IPv4-mapped IPv6 is judged as the IPv4 it maps.
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
    parsed = ipaddr.process(address.replace(/^\[|\]$/g, ''));
  } catch {
    return 'invalid';
  }
  if (METADATA.has(parsed.toString())) return 'metadata';
  return parsed.range();
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
