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
 * the bound (many callers) it starts again. Only what could be an address is remembered, and
 * as a copy of its own: an X-Forwarded-For hop is a piece of the header, and a piece of a
 * string keeps the whole string alive (up to 16 KB a header).
 */
const canonical = new Map<string, string>();
function canonicalAddress(raw: string): string {
  let text = canonical.get(raw);
  if (text === undefined) {
    if (!couldBeAddress(raw)) return normalizeIp(withoutPort(raw));
    const key = ownCopy(raw);
    text = normalizeIp(withoutPort(key));
    if (canonical.size >= 10_000) canonical.clear();
    canonical.set(key, text);
  }
  return text;
}

/** The longest text of an IP address (IPv6 with an IPv4 tail, in brackets with a port); longer is never remembered. */
const LONGEST_ADDRESS = 53;

/** `a.b.c.d:port`, `[v6]:port` and `[v6]`: how some proxies write a forwarded hop. */
const WITH_PORT = /^(?:(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}|\[([0-9A-Za-z:.%_-]+)\](?::\d{1,5})?)$/;

/**
 * The address of a forwarded hop written with a port (Azure's gateway and IIS's ARR write
 * them so): every connection comes from another port, and keyed with it one caller had a new
 * rate-limit budget on each (a review helper, 2026-11-27).
 */
function withoutPort(text: string): string {
  const m = WITH_PORT.exec(text);
  return m ? (m[1] ?? m[2]) : text;
}

/** Whether a string is short enough to be an address, and so to be remembered. */
export function couldBeAddress(text: string): boolean {
  return text.length <= LONGEST_ADDRESS;
}

/** A copy of `text` that shares no memory with the string it was cut from. */
export function ownCopy(text: string): string {
  return Buffer.from(text, 'utf8').toString('utf8');
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
