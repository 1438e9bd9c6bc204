import { signBody, signStandard } from './verify.ts';

/** What goes on the wire for one attempt of one delivery. */
export interface SignedRequest {
  body: string;
  headers: Record<string, string>;
}

/**
 * Builds the body and headers of one attempt. The body's `timestamp` is this attempt's time,
 * so every retry is re-signed and a captured request goes stale after the receiver's
 * tolerance. `X-AUTH-Delivery` / `webhook-id` carry the delivery id, stable across retries,
 * for the receiver's deduplication.
 */
export function signDelivery(
  delivery: { id: string; event: string; data: unknown },
  secret: string,
  at: Date = new Date(),
): SignedRequest {
  const body = JSON.stringify({ event: delivery.event, timestamp: at.toISOString(), data: delivery.data });
  const unixSeconds = Math.floor(at.getTime() / 1000);
  return {
    body,
    headers: {
      'Content-Type': 'application/json',
      'User-Agent': 'auth-service-webhooks/1',
      'X-AUTH-Signature': signBody(body, secret),
      'X-AUTH-Event': delivery.event,
      'X-AUTH-Delivery': delivery.id,
      'webhook-id': delivery.id,
      'webhook-timestamp': String(unixSeconds),
      'webhook-signature': signStandard(delivery.id, unixSeconds, body, secret),
    },
  };
}
