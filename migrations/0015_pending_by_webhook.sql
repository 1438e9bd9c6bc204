-- The pending deliveries of one webhook: every claim closes those of webhooks that are off once
-- nobody holds a lease on them (src/webhooks/queries.ts claimDueDeliveries), with an index probe
-- per such webhook rather than a walk through its delivery history.
CREATE INDEX webhook_deliveries_pending_by_webhook ON webhook_deliveries (webhook_id) WHERE status = 'pending';
