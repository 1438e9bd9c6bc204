-- Indexes the pruner (src/retention/) walks, oldest first, so a pass over a large table
-- reads only what it deletes. IF NOT EXISTS: on a large database, build them beforehand with
-- CREATE INDEX CONCURRENTLY (README, "Data retention") and this migration takes no lock.

-- Tokens that can go once old enough: used, invalidated, or expired unused with their
-- token.expired event written. A fresh token enters it only when it is used or swept, so
-- the issue path writes no extra index entry.
CREATE INDEX IF NOT EXISTS sso_tokens_prunable ON sso_tokens (expires_at)
  WHERE used_at IS NOT NULL OR invalidated_at IS NOT NULL OR expiry_notified_at IS NOT NULL;

-- Finished deliveries by completion; pending ones are never pruned.
CREATE INDEX IF NOT EXISTS webhook_deliveries_finished ON webhook_deliveries (completed_at)
  WHERE status IN ('succeeded', 'failed');

-- Failed-login counters by their last failure.
CREATE INDEX IF NOT EXISTS login_attempts_updated ON login_attempts (updated_at);
