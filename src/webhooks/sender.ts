import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { type GuardPolicy, type Lookup, parseWebhookUrl, type ResolvedAddress, resolveTarget, UrlNotAllowedError } from './address-guard.ts';
import type { ClaimedDelivery } from './delivery-queries.ts';
import { signDelivery } from './signing.ts';

/** At most this much of a receiver's answer is read (and kept, for the delivery log). */
export const RESPONSE_BODY_CAP = 4096;

/**
 * Connections to receivers stay open between deliveries: under load a receiver gets its
 * events over a few kept-alive connections instead of a new TCP (and TLS) handshake each.
 * A pooled connection was opened to an address the SSRF guard checked at the time (the
 * `lookup` below pins new ones); an idle one is closed after 4 s, before the usual server
 * keep-alive timeout of 5 s would close it under a request.
 */
const agentOptions = { keepAlive: true, timeout: 4000, maxFreeSockets: 32, scheduling: 'lifo' as const };
const HTTP = { transport: http, agent: new http.Agent(agentOptions) };
const HTTPS = { transport: https, agent: new https.Agent(agentOptions) };

/** The outcome of one attempt. `ok` only for a 2xx answer. */
export interface AttemptOutcome {
  ok: boolean;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

/**
 * POSTs `body` to `url`, connecting to `target` (the address the SSRF guard checked) rather
 * than resolving the name again; Host and TLS SNI still name the URL's host. Redirects are
 * not followed (a 3xx is a failure); the attempt ends when `deadline.signal` aborts (the
 * caller's timer, started before name resolution), with the answer's status if it had come;
 * at most RESPONSE_BODY_CAP bytes of the answer are read.
 */
export function postOnce(
  url: URL,
  target: ResolvedAddress,
  payload: { body: string; headers: Record<string, string> },
  deadline: { signal: AbortSignal; timeoutMs: number },
): Promise<AttemptOutcome> {
  const started = performance.now();
  const pinned: LookupFunction = (_hostname, options, callback) => {
    // Node asks for all addresses when it may race IPv4 and IPv6 (autoSelectFamily).
    if ((options as { all?: boolean }).all) (callback as unknown as (e: null, a: ResolvedAddress[]) => void)(null, [target]);
    else callback(null, target.address, target.family);
  };
  return new Promise((resolve) => {
    let settled = false;
    /** The answer's status, once its headers arrived: what counts, however slowly the body follows. */
    let answered: number | null = null;
    /** `reusable`: the answer was read to its end, so the connection can carry the next delivery. */
    const finish = (statusCode: number | null, error: string | null, reusable = false) => {
      if (settled) return;
      settled = true;
      deadline.signal.removeEventListener('abort', onAbort);
      if (!reusable) req.destroy();
      const ok = error === null && statusCode !== null && statusCode >= 200 && statusCode < 300;
      resolve({ ok, statusCode, error, durationMs: Math.round(performance.now() - started) });
    };
    const { transport, agent } = url.protocol === 'https:' ? HTTPS : HTTP;
    const req = transport.request(
      url,
      {
        method: 'POST',
        headers: { ...payload.headers, 'Content-Length': String(Buffer.byteLength(payload.body)) },
        lookup: pinned,
        agent,
      },
      (res) => {
        answered = res.statusCode ?? null;
        let read = 0;
        res.on('data', (chunk: Buffer) => {
          read += chunk.length;
          // Only the status matters; an endless answer must not hold the attempt (and its
          // lease) open, so stop once the cap is read.
          if (read >= RESPONSE_BODY_CAP) finish(res.statusCode ?? null, null);
        });
        res.on('end', () => finish(res.statusCode ?? null, null, true));
        res.on('error', () => finish(res.statusCode ?? null, null));
      },
    );
    // a status that arrived in time stands: a 2xx whose body is still trickling in when the
    // time is up was delivered (the connection is closed, not kept)
    const onAbort = () => (answered === null ? finish(null, `timeout after ${deadline.timeoutMs} ms`) : finish(answered, null));
    if (deadline.signal.aborted) queueMicrotask(onAbort);
    else deadline.signal.addEventListener('abort', onAbort);
    req.on('error', (err: NodeJS.ErrnoException) => finish(null, err.code ? `${err.code}: ${err.message}` : err.message));
    req.end(payload.body);
  });
}

/**
 * One attempt of a delivery: signed now, its URL's name resolved and checked by the SSRF
 * guard (`policy`), posted to the checked address. Never throws: a refusal, a timeout or a
 * connection error is an outcome without a status code.
 */
export async function sendDelivery(delivery: ClaimedDelivery, options: { timeoutMs: number; policy: GuardPolicy; lookup: Lookup }): Promise<AttemptOutcome> {
  const started = performance.now();
  const signed = signDelivery(delivery, delivery.secret);
  // The timeout bounds the whole attempt, name resolution included (getaddrinfo can hang).
  // Its timer is cleared when the attempt ends: AbortSignal.timeout's would still fire for
  // every attempt, seconds later, each building an exception and rejecting a promise.
  const { timeoutMs } = options;
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), timeoutMs);
  try {
    const url = parseWebhookUrl(delivery.url);
    const timedOut = new Promise<never>((_, reject) =>
      deadline.signal.addEventListener('abort', () => reject(new Error(`timeout after ${timeoutMs} ms resolving ${url.hostname}`)), { once: true }));
    timedOut.catch(() => {});
    const target = await Promise.race([resolveTarget(url, options.policy, options.lookup), timedOut]);
    return await postOnce(url, target, signed, { signal: deadline.signal, timeoutMs });
  } catch (err) {
    const message = err instanceof UrlNotAllowedError ? `refused: ${err.message}` : `error: ${(err as Error).message}`;
    return { ok: false, statusCode: null, error: message, durationMs: Math.round(performance.now() - started) };
  } finally {
    clearTimeout(timer);
  }
}
