export { listWebhookSummaries, type WebhookSummary } from './queries.ts';
