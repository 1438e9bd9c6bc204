/**
 * Verification of this service's webhook deliveries, for receivers. Self-contained (only
 * node:crypto) so a client system can import it without the rest of the service:
 *
 *   import { verifyWebhook } from '@auth-service/client/webhooks';
 *   const event = verifyWebhook(rawBody, req.headers, process.env.WEBHOOK_SECRET);
 *
 * Each delivery is a POST whose body is `{event, timestamp, data}`. `X-AUTH-Signature` is the
 * hex HMAC-SHA256 of the exact raw body keyed with the webhook secret; `timestamp` (ISO 8601
 * UTC) is the time of this attempt and lies inside the MAC, so checking it bounds replays.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** The JSON envelope of every delivery (docs/contract.md, "Webhooks"). */
export interface WebhookEnvelope<T = Record<string, unknown>> {
  event: string;
  timestamp: string;
  data: T;
}

/** Why a delivery was refused; `reason` is a stable code. */
export class WebhookVerificationError extends Error {
  constructor(
    readonly reason: 'missing_signature' | 'malformed_signature' | 'signature_mismatch' | 'invalid_body' | 'timestamp_out_of_tolerance',
    message: string,
  ) {
    super(message);
    this.name = 'WebhookVerificationError';
  }
}

/** Header bags as Node (`req.headers`), Express, or fetch (`Headers`) give them. */
export type HeaderBag = Headers | Record<string, string | string[] | undefined>;

/** The hex HMAC-SHA256 of `body` keyed with `secret` (the X-AUTH-Signature value). */
export function signBody(body: string | Uint8Array, secret: string): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

/**
 * The Standard Webhooks signature: `v1,` + base64 HMAC-SHA256 of `id.timestamp.body`, keyed
 * with the UTF-8 bytes of the secret (in that ecosystem's libraries, pass the secret "raw").
 */
export function signStandard(id: string, unixSeconds: number, body: string | Uint8Array, secret: string): string {
  const mac = createHmac('sha256', secret).update(`${id}.${unixSeconds}.`).update(body).digest('base64');
  return `v1,${mac}`;
}

function header(headers: HeaderBag, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const bag = headers as Record<string, string | string[] | undefined>;
  const key = Object.keys(bag).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : bag[key];
  return Array.isArray(value) ? value[0] : value;
}

const HEX_SHA256 = /^[0-9a-f]{64}$/i;

/**
 * Checks a delivery and returns its parsed envelope; throws WebhookVerificationError otherwise.
 *
 * - `rawBody`: the request body exactly as received (a string or the raw bytes; NOT a parsed
 *   and re-serialized object, which would not match byte for byte).
 * - `headers`: the request headers (any case).
 * - `secret`: the secret given when the webhook was registered; or several (a list), while its
 *   secret is being rotated: a delivery signed with any of them is accepted.
 * - `toleranceSeconds` (default 300): how far the body's `timestamp` may be from now, either way.
 *
 * The signature is compared in constant time; a value of the wrong length or that is not hex
 * is refused before any comparison. Deduplicate on the `X-AUTH-Delivery` header, which stays
 * the same across retries of one delivery.
 */
export function verifyWebhook<T = Record<string, unknown>>(
  rawBody: string | Uint8Array,
  headers: HeaderBag,
  secret: string | readonly string[],
  options: { toleranceSeconds?: number; now?: Date } = {},
): WebhookEnvelope<T> {
  const { toleranceSeconds = 300, now = new Date() } = options;
  const given = header(headers, 'x-auth-signature')?.trim();
  if (!given) throw new WebhookVerificationError('missing_signature', 'The X-AUTH-Signature header is missing');
  if (!HEX_SHA256.test(given)) {
    throw new WebhookVerificationError('malformed_signature', 'X-AUTH-Signature is not 64 hexadecimal characters');
  }
  const presented = Buffer.from(given, 'hex');
  let matched = false;
  for (const s of typeof secret === 'string' ? [secret] : secret) {
    matched = timingSafeEqual(presented, Buffer.from(signBody(rawBody, s), 'hex')) || matched;
  }
  if (!matched) {
    throw new WebhookVerificationError('signature_mismatch', 'The signature does not match the body');
  }
  let envelope: WebhookEnvelope<T>;
  try {
    envelope = JSON.parse(typeof rawBody === 'string' ? rawBody : Buffer.from(rawBody).toString('utf8'));
  } catch {
    throw new WebhookVerificationError('invalid_body', 'The body is not JSON');
  }
  if (typeof envelope?.event !== 'string' || typeof envelope.timestamp !== 'string' || typeof envelope.data !== 'object') {
    throw new WebhookVerificationError('invalid_body', 'The body is not a webhook envelope');
  }
  const sent = Date.parse(envelope.timestamp);
  if (Number.isNaN(sent) || Math.abs(now.getTime() - sent) > toleranceSeconds * 1000) {
    throw new WebhookVerificationError('timestamp_out_of_tolerance', `The delivery timestamp is more than ${toleranceSeconds}s from now`);
  }
  return envelope;
}
