import { writeAudit } from '../audit/writer.ts';
import type { Queryable } from '../db/db.ts';
import { type GuardPolicy, type Lookup, parseWebhookUrl, resolveTarget, systemLookup, UrlNotAllowedError } from '../webhooks/address-guard.ts';
import { eventSet } from '../webhooks/events.ts';
import { deleteWebhook, disableWebhook, insertWebhook, listWebhooks, lockWebhook, updateWebhook, type WebhookRecord } from '../webhooks/queries.ts';
import { registerWebhookSchema } from '../webhooks/schemas.ts';
import { SeedError } from './errors.ts';
import type { StagedWebhook } from './webhook-queries.ts';

/** What a run did (or a plan would do) to one webhook, named by its URL. */
export interface WebhookChange {
  url: string;
  change: 'created' | 'changed' | 'deleted' | 'unchanged' | 'not in the files';
  /** created: its events and active flag; changed: each changed field, old and new (the secret only "changed"). */
  fields?: Record<string, unknown>;
}

/** How the run reads and checks webhook registrations. */
export interface WebhookSeedOptions {
  /** Where each registration's secret_env is read. */
  env: Record<string, string | undefined>;
  policy: GuardPolicy;
  lookup?: Lookup;
  /** Delete the webhooks the files do not name. */
  prune: boolean;
  /** The run's actor, for the audit entries' details (via: seed). */
  actor: Record<string, unknown>;
}

interface Wanted {
  url: string;
  events: string[];
  active: boolean;
  secret: string;
  file: string;
}

/**
 * Validates the registrations the files staged as the API validates a registration (URL
 * rules, in production the address guard, known events, a secret of 16 to 512 characters,
 * here read from the environment variable the row names), then writes them: a webhook the
 * files name by its URL is created or brought to what they say, one they do not name is kept
 * (reported as not in the files) or, with prune, deleted. Each change is audited as the
 * API's are (webhook.create, webhook.update, webhook.delete) with details.via = "seed".
 * Files own every webhook, as they own every client (docs/clients-as-code.md).
 */
export async function applySeedWebhooks(tx: Queryable, staged: readonly StagedWebhook[], options: WebhookSeedOptions): Promise<WebhookChange[]> {
  const wanted = await validate(staged, options);
  const existing = await listWebhooks(tx);
  const changes: WebhookChange[] = [];
  const audit = (action: string, details: Record<string, unknown>) =>
    writeAudit(tx, { action, outcome: 'success', details: { ...options.actor, ...details } });
  for (const w of wanted) {
    const matches = existing.filter((e) => e.url === w.url);
    if (matches.length > 1) {
      throw new SeedError(w.file, `webhook ${w.url}: ${matches.length} webhooks have this URL (ids ${matches.map((m) => m.id).join(', ')}); a seed names a webhook by its URL: delete the extra ones first`);
    }
    const before = matches[0];
    if (!before) {
      const created = await insertWebhook(tx, { url: w.url, events: w.events, secret: w.secret, createdBy: null });
      if (!w.active) await disableWebhook(tx, created.id, 'disabled by seed');
      await audit('webhook.create', { file: w.file, webhook_id: created.id, url: w.url, events: w.events, active: w.active });
      changes.push({ url: w.url, change: 'created', fields: { events: w.events, active: w.active, secret: 'set' } });
      continue;
    }
    const fields = differences(before, w);
    if (Object.keys(fields).length === 0) {
      changes.push({ url: w.url, change: 'unchanged' });
      continue;
    }
    await lockWebhook(tx, before.id, true);
    await updateWebhook(tx, before.id, { events: w.events, secret: w.secret, active: w.active ? true : undefined });
    if (!w.active && before.active) await disableWebhook(tx, before.id, 'disabled by seed');
    await audit('webhook.update', { file: w.file, webhook_id: before.id, changed: Object.keys(fields).sort(), url: w.url, events: w.events, active: w.active });
    changes.push({ url: w.url, change: 'changed', fields });
  }
  const named = new Set(wanted.map((w) => w.url));
  for (const e of existing.filter((x) => !named.has(x.url))) {
    if (!options.prune) {
      changes.push({ url: e.url, change: 'not in the files' });
      continue;
    }
    await deleteWebhook(tx, e.id);
    await audit('webhook.delete', { file: null, prune: true, webhook_id: e.id, url: e.url });
    changes.push({ url: e.url, change: 'deleted' });
  }
  return changes.sort((a, b) => a.url.localeCompare(b.url));
}

/** The fields of a webhook that differ from what the files say: events and active old and new, the secret only "changed". */
function differences(before: WebhookRecord, w: Wanted): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  if (eventSet(before.events) !== eventSet(w.events)) fields.events = { from: before.events, to: w.events };
  if (before.active !== w.active) fields.active = { from: before.active, to: w.active, ...(before.disabled_reason ? { disabled_reason: before.disabled_reason } : {}) };
  if (before.secret !== w.secret) fields.secret = 'changed';
  return fields;
}

async function validate(staged: readonly StagedWebhook[], options: WebhookSeedOptions): Promise<Wanted[]> {
  const wanted: Wanted[] = [];
  for (const row of staged) {
    const file = row.file ?? 'seed';
    const fail = (message: string): never => {
      throw new SeedError(file, `webhook ${row.url}: ${message}`);
    };
    const secret = options.env[row.secret_env];
    if (secret === undefined || secret === '') fail(`the environment variable ${row.secret_env}, which holds its signing secret, is not set`);
    const parsed = registerWebhookSchema.safeParse({ url: row.url, events: row.events, secret });
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const field = issue.path[0] === 'secret' ? `its secret (${row.secret_env})` : String(issue.path[0]);
      fail(`${field} ${issue.message}`);
    }
    let url: URL;
    try {
      url = parseWebhookUrl(row.url.trim());
      if (options.policy.blockPrivate) await resolveTarget(url, options.policy, options.lookup ?? systemLookup);
    } catch (err) {
      if (!(err instanceof UrlNotAllowedError)) throw err;
      return fail(err.message);
    }
    const normalized = url.toString();
    if (wanted.some((w) => w.url === normalized)) fail(`named twice (as ${normalized})`);
    wanted.push({ url: normalized, events: [...new Set(row.events)], active: row.active, secret: secret!, file });
  }
  return wanted;
}
