import type { Queryable } from '../db/db.ts';
import { EVENT_TYPES } from '../webhooks/events.ts';

/** One webhook registration a seed file staged (pg_temp.seed_webhooks). */
export interface StagedWebhook {
  url: string;
  events: string[];
  active: boolean;
  secret_env: string;
  file: string | null;
}

const quote = (s: string) => `'${s.replace(/'/g, "''")}'`;

/**
 * The table seed files write webhook registrations to, one row per webhook (its URL is its key):
 * `INSERT INTO seed_webhooks (url, events, active, secret_env) VALUES (...)`. Temporary, made
 * by the runner for each run (a file applied with psql alone fails on it, rather than doing
 * nothing); the runner validates each row as the API would and writes the webhooks after the
 * files (src/seeds/webhooks.ts). The database refuses what is plainly wrong here already: an
 * event that does not exist, no event, a URL that is not http(s), an environment variable name
 * that is not one. `file` is the file that staged the row (from the run's actor).
 */
export async function createWebhookStage(tx: Queryable): Promise<void> {
  await tx.exec(`
  CREATE TEMPORARY TABLE seed_webhooks (
    url text PRIMARY KEY CONSTRAINT seed_webhooks_url_valid CHECK (length(url) <= 2048 AND url ~* '^https?://[^/?#]+'),
    events text[] NOT NULL CONSTRAINT seed_webhooks_events_valid
      CHECK (cardinality(events) > 0 AND array_position(events, NULL) IS NULL AND events <@ ARRAY[${EVENT_TYPES.map(quote).join(', ')}]::text[]),
    active boolean NOT NULL DEFAULT true,
    secret_env text NOT NULL CONSTRAINT seed_webhooks_secret_env_valid CHECK (secret_env ~ '^[A-Za-z_][A-Za-z0-9_]{0,127}$'),
    file text DEFAULT (nullif(current_setting('auth.actor', true), '')::jsonb ->> 'file')
  ) ON COMMIT DROP`);
}

/** The staged registrations, by URL. */
export async function stagedWebhooks(tx: Queryable): Promise<StagedWebhook[]> {
  return (await tx.query<StagedWebhook>('SELECT url, events, active, secret_env, file FROM pg_temp.seed_webhooks ORDER BY url')).rows;
}
