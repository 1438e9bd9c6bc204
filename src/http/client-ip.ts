import type { Request } from 'express';
import ipaddr from 'ipaddr.js';

/** Where a request keeps its resolved address. */
const CLIENT_IP = Symbol('clientIp');

/**
 * The caller's address: the socket address, or the X-Forwarded-For hop Express resolved
 * under TRUST_PROXY. IPv4-mapped IPv6 (::ffff:1.2.3.4) is folded to IPv4.
 */
export function clientIp(req: Request): string {
  // asked several times per request (allow list, rate limit, audit): Express resolves req.ip anew each time
  const resolved = req as Request & { [CLIENT_IP]?: string };
  return (resolved[CLIENT_IP] ??= canonicalAddress(req.ip ?? req.socket.remoteAddress ?? ''));
}

/**
 * normalizeIp for callers' addresses, remembered: a service hears from few distinct
 * addresses, and parsing one costs more than the rest of the allow-list check. Bounded; past
 * the bound (many callers) it starts again.
 */
const canonical = new Map<string, string>();
function canonicalAddress(raw: string): string {
  let text = canonical.get(raw);
  if (text === undefined) {
    text = normalizeIp(raw);
    if (canonical.size >= 10_000) canonical.clear();
    canonical.set(raw, text);
  }
  return text;
}

/** Canonical text of an address (IPv4-mapped folded); the input unchanged when it is not one. */
export function normalizeIp(ip: string): string {
  try {
    return ipaddr.process(ip).toString();
  } catch {
    return ip;
  }
}

/** Express's `trust proxy` value for a TRUST_PROXY setting. */
export function trustProxySetting(value: string | undefined): boolean | number | string {
  if (value === undefined || value === 'false') return false;
  if (/^\d+$/.test(value)) return Number.parseInt(value, 10);
  return value;
}
