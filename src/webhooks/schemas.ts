import { z } from 'zod';
import { EVENT_TYPES } from './events.ts';

/** POST /api/webhooks (docs/contract.md, "Webhooks"): known event names only, http(s) URLs only, secrets of 16+ characters. */
export const registerWebhookSchema = z.object({
  url: z
    .string()
    .max(2048)
    .refine((v) => /^https?:\/\//i.test(v.trim()) && URL.canParse(v.trim()), 'must be an absolute http or https URL'),
  events: z
    .array(z.enum(EVENT_TYPES, { error: `must be one of ${EVENT_TYPES.join(', ')}` }))
    .min(1, 'name at least one event')
    .max(EVENT_TYPES.length * 2),
  secret: z.string().min(16, 'must be at least 16 characters').max(512),
});

/**
 * PATCH /api/webhooks/:id: any of url, events, active and secret, each validated as at
 * registration; at least one.
 */
export const updateWebhookSchema = z.object({
  url: registerWebhookSchema.shape.url.optional(),
  events: registerWebhookSchema.shape.events.optional(),
  active: z.boolean().optional(),
  secret: registerWebhookSchema.shape.secret.optional(),
}).strict().refine((v) => Object.keys(v).length > 0, 'name at least one of url, events, active, secret')
  // the refinement says it to zod; the document (src/openapi/document.ts) says it to readers and generated clients
  .meta({ minProperties: 1 });

/** GET /api/webhooks/:id/deliveries */
export const listDeliveriesQuery = z.object({
  limit: z.coerce.number().int().min(1).max(500).default(50),
});
