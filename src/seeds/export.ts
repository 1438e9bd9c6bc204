import type { Queryable } from '../db/db.ts';
import { listWebhooks } from '../webhooks/queries.ts';
import { clientColumns, clientRows } from './column-queries.ts';
import type { ClientColumn, ClientRow } from './columns.ts';

/** A webhook as an export writes it: the secret never, only the environment variable to read it from. */
export interface ExportedWebhook {
  url: string;
  events: string[];
  active: boolean;
  secret_env: string;
}

/** `client export`: the seed file, and what it holds (--json). */
export interface SeedExport {
  seed: string;
  clients: ClientRow[];
  webhooks: ExportedWebhook[];
}

const quote = (s: string) => `'${s.replace(/'/g, "''")}'`;

/** One to_jsonb value as an SQL literal of the column's type. */
function literal(v: unknown, type: string): string {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'boolean') return String(v);
  if (typeof v === 'number') return String(v);
  if (typeof v === 'string') return type === 'text' ? quote(v) : `${quote(v)}::${type}`;
  if (Array.isArray(v)) {
    if (v.length === 0) return `'{}'::${type}`;
    return `ARRAY[${v.map((e) => literal(e, 'text')).join(', ')}]::${type}`;
  }
  return `${quote(JSON.stringify(v))}::${type}`;
}

function clientsUpsert(columns: readonly ClientColumn[], rows: readonly ClientRow[]): string {
  if (rows.length === 0) return '-- no client systems\n';
  const names = columns.map((c) => c.name);
  return [
    // eslint-disable-next-line no-restricted-syntax -- the seed file's text, written for the administrator, never run here
    `INSERT INTO clients (${names.join(', ')}) VALUES`,
    rows.map((row) => `  (${columns.map((c) => literal(row[c.name], c.type)).join(', ')})`).join(',\n'),
    'ON CONFLICT (client_id) DO UPDATE SET',
    `${names.filter((n) => n !== 'client_id').map((n) => `  ${n} = EXCLUDED.${n}`).join(',\n')};`,
    '',
  ].join('\n');
}

function webhooksInsert(webhooks: readonly ExportedWebhook[]): string {
  if (webhooks.length === 0) return '-- no webhooks\n';
  return [
    '-- Webhooks, each named by its URL. Its signing secret is read from the environment variable',
    '-- named here when the file is applied (never written in the file): set each to the secret',
    '-- the webhook has now, or its receiver is sent deliveries signed with another one.',
    // eslint-disable-next-line no-restricted-syntax -- the seed file's text, written for the administrator, never run here
    'INSERT INTO seed_webhooks (url, events, active, secret_env) VALUES',
    webhooks.map((w) => `  (${quote(w.url)}, ${literal(w.events, 'text[]')}, ${w.active}, ${quote(w.secret_env)})`).join(',\n') + ';',
    '',
  ].join('\n');
}

/**
 * The current clients and webhooks as a seed file in the documented upsert form
 * (docs/clients-as-code.md): every documented column of every client (src/seeds/columns.ts:
 * secret hashes, never secrets), and every webhook with the name of the environment variable
 * its secret is to be read from (WEBHOOK_<id>_SECRET). Applied to an empty database it
 * recreates them; applied to the same database it changes nothing.
 */
export async function exportSeed(q: Queryable): Promise<SeedExport> {
  const columns = await clientColumns(q);
  const clients = [...(await clientRows(q, columns)).values()];
  const webhooks = (await listWebhooks(q)).map((w) => ({ url: w.url, events: w.events, active: w.active, secret_env: `WEBHOOK_${w.id}_SECRET` }));
  const seed = [
    '-- Client systems and webhooks, exported by `npm run admin -- client export`.',
    '-- Apply with `npm run seed -- FILE` (see docs/clients-as-code.md); these files own every client',
    '-- and webhook: `npm run seed -- FILE --check` reports any that differ or are not here.',
    '',
    clientsUpsert(columns, clients),
    webhooksInsert(webhooks),
  ].join('\n');
  return { seed, clients, webhooks };
}
