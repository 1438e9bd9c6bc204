import { z } from 'zod';
import { actorOf } from '../auth/actor.ts';
import { POSITIVE_ID } from '../http/params.ts';
import { err, forbidden, invalid, limited, unauthenticated } from '../openapi/operation.ts';
import * as R from '../openapi/responses.ts';
import { route } from '../routes/declare.ts';
import { listDeliveriesQuery, registerWebhookSchema, updateWebhookSchema } from './schemas.ts';

/** `:id` of a webhook: a positive integer; anything else is 400 invalid_id before the body is looked at. */
const webhookId = z.object({ id: z.string().regex(POSITIVE_ID).transform(Number) });
const redeliveryId = webhookId.extend({ delivery: z.string() });

const badId = err('Malformed id', { error: 'invalid_id', message: 'The id must be a positive integer' });
const guarded = { 401: unauthenticated, 403: forbidden, 429: limited };
const noWebhook = err('No such webhook', { error: 'webhook_not_found', message: 'No webhook 3' });
const hook = { id: 3, url: 'https://shop.example/hooks/auth', events: ['user.login', 'user.locked'], active: true, created_at: '2026-01-31T12:00:00.000Z' };

/** Webhook administration: administrators, by session or bearer access token, under the per-user limit. */
export const WEBHOOK_ROUTES = [
  route({
    method: 'post', path: '/api/webhooks', tag: 'Webhooks', access: 'admin', limit: 'user',
    summary: 'Register a webhook',
    description: 'Deliveries are POSTs of `{event, timestamp, data}` signed with `X-AUTH-Signature` (hex HMAC-SHA256 of the raw body, keyed with `secret`). The secret is never returned.',
    body: registerWebhookSchema,
    example: { url: 'https://shop.example/hooks/auth', events: ['user.login', 'user.locked'], secret: 'a-signing-secret-of-16+-chars' },
    responses: { 201: { description: 'Registered', schema: R.webhook, example: hook }, 400: invalid, ...guarded },
    handle: ({ webhooks }) => async ({ req, res, body }) => {
      res.status(201).json(await webhooks.register(body, actorOf(req, res, 'admin_api')));
    },
  }),
  route({
    method: 'get', path: '/api/webhooks', tag: 'Webhooks', access: 'admin', limit: 'user',
    summary: 'List webhooks',
    responses: { 200: { description: 'All webhooks, without secrets', schema: R.webhook.array() }, ...guarded },
    handle: ({ webhooks }) => async ({ res }) => {
      res.json(await webhooks.list());
    },
  }),
  route({
    method: 'patch', path: '/api/webhooks/:id', tag: 'Webhooks', access: 'admin', limit: 'user', params: webhookId,
    summary: 'Change a webhook: any of url, events, active, secret',
    description: 'Each field is validated as at registration (the same SSRF guard for `url`). The delivery history is kept. Every later attempt, retries of earlier events included, goes to the new URL signed with the new secret: to rotate a secret without losing events, let the receiver accept both secrets first. `active: false` closes pending deliveries as failed (they can be redelivered later); `active: true` turns a webhook disabled by a 410 back on. Audited, without the secret.',
    body: updateWebhookSchema,
    example: { secret: 'the-new-signing-secret-of-16+-chars' },
    responses: {
      200: { description: 'The changed webhook (never the secret)', schema: R.webhook, example: { ...hook, disabled_reason: null } },
      400: err('Invalid body (`validation_error`), URL not allowed, or a malformed id (`invalid_id`)', { error: 'invalid_id', message: 'The id must be a positive integer' }),
      404: noWebhook, ...guarded,
    },
    handle: ({ webhooks }) => async ({ req, res, body, params }) => {
      res.json(await webhooks.update(params.id, body, actorOf(req, res, 'admin_api')));
    },
  }),
  route({
    method: 'delete', path: '/api/webhooks/:id', tag: 'Webhooks', access: 'admin', limit: 'user', params: webhookId,
    summary: 'Delete a webhook',
    responses: { 204: { description: 'Deleted' }, 400: badId, 404: noWebhook, ...guarded },
    handle: ({ webhooks }) => async ({ req, res, params }) => {
      await webhooks.remove(params.id, actorOf(req, res, 'admin_api'));
      res.status(204).end();
    },
  }),
  route({
    method: 'get', path: '/api/webhooks/:id/deliveries', tag: 'Webhooks', access: 'admin', limit: 'user', params: webhookId,
    summary: 'A webhook\'s recent deliveries with their attempts',
    query: listDeliveriesQuery,
    responses: { 200: { description: 'Newest first', schema: R.webhookDelivery.array() }, 400: err('Invalid query (`validation_error`) or a malformed id (`invalid_id`)'), 404: noWebhook, ...guarded },
    handle: ({ webhooks }) => async ({ res, params, query }) => {
      res.json(await webhooks.deliveries(params.id, query.limit));
    },
  }),
  route({
    method: 'post', path: '/api/webhooks/:id/deliveries/:delivery/redeliver', tag: 'Webhooks', access: 'admin', limit: 'user', params: redeliveryId,
    summary: 'Send a finished delivery again (same delivery id)',
    responses: { 202: { description: 'Queued', schema: R.redelivery }, 400: badId, 404: err('No such webhook or delivery'), 409: err('The delivery is still pending (delivery_pending), or the webhook is disabled (webhook_inactive)'), ...guarded },
    handle: ({ webhooks }) => async ({ req, res, params }) => {
      res.status(202).json(await webhooks.redeliver(params.id, params.delivery, actorOf(req, res, 'admin_api')));
    },
  }),
];
