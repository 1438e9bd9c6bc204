import type { ClientChange, SeedResult, WebhookChange } from './apply.ts';

/**
 * What `npm run seed` prints for people: an applied run's counts, a plan's changes (each
 * changed column, old -> new, a secret only "changed"), and a check's differences.
 */

const list = (ids: string[]) => (ids.length ? ` (${ids.join(', ')})` : '');
const value = (v: unknown) => (typeof v === 'string' && (v === 'set' || v === 'changed') ? v : JSON.stringify(v));

/** Whether the database differs from the files: anything but unchanged. */
export function differences(r: SeedResult): { clients: ClientChange[]; webhooks: WebhookChange[] } {
  return { clients: r.clients.filter((c) => c.change !== 'unchanged'), webhooks: r.webhooks.filter((w) => w.change !== 'unchanged') };
}

export function appliedSummary(r: SeedResult): string {
  const hooks = (change: WebhookChange['change']) => r.webhooks.filter((w) => w.change === change).map((w) => w.url);
  const lines = [
    `Applied ${r.files.join(', ')} in one transaction:`,
    `  created ${r.created.length}${list(r.created)}, updated ${r.updated.length}${list(r.updated)}, deleted ${r.deleted.length}${list(r.deleted)}, unchanged ${r.unchanged}`,
  ];
  if (r.webhooks.length > 0) {
    lines.push(`  webhooks: created ${hooks('created').length}${list(hooks('created'))}, updated ${hooks('changed').length}${list(hooks('changed'))}, `
      + `deleted ${hooks('deleted').length}${list(hooks('deleted'))}, unchanged ${hooks('unchanged').length}`);
  }
  const kept = r.clients.filter((c) => c.change === 'not in the files').map((c) => c.client_id);
  if (kept.length > 0) lines.push(`  not in the files, kept: ${kept.join(', ')} (--prune deletes them)`);
  return lines.join('\n');
}

function changeLines(name: string, change: string, fields: Record<string, unknown> | undefined, indent: string): string[] {
  const lines = [`${indent}${name}: ${change}`];
  for (const [field, v] of Object.entries(fields ?? {})) {
    const fromTo = v !== null && typeof v === 'object' && 'from' in v && 'to' in v ? `${value(v.from)} -> ${value(v.to)}` : value(v);
    lines.push(`${indent}  ${field}: ${fromTo}`);
  }
  return lines;
}

/** A plan: every client and webhook with what applying would do to it. */
export function planText(r: SeedResult): string {
  const lines = [`Plan for ${r.files.join(', ')} (nothing was applied):`];
  for (const c of r.clients) lines.push(...changeLines(c.client_id, c.change, c.columns, '  '));
  for (const w of r.webhooks) lines.push(...changeLines(w.url, `webhook ${w.change}`, w.fields, '  '));
  if (r.clients.length === 0 && r.webhooks.length === 0) lines.push('  no clients, no webhooks');
  return lines.join('\n');
}

/** A check: the differences between the database and the files, or that there are none. */
export function checkText(r: SeedResult): string {
  const d = differences(r);
  const n = (count: number, word: string) => `${count} ${word}${count === 1 ? '' : 's'}`;
  if (d.clients.length === 0 && d.webhooks.length === 0) return `The database matches ${r.files.join(', ')}: ${n(r.clients.length, 'client')}, ${n(r.webhooks.length, 'webhook')}.`;
  const meaning: Record<string, string> = {
    created: 'in the files, not in the database',
    changed: 'differs (database -> files)',
    deleted: 'deleted by the files',
    'not in the files': 'in the database, not in the files',
  };
  const lines = [`The database differs from ${r.files.join(', ')}:`];
  for (const c of d.clients) lines.push(...changeLines(c.client_id, meaning[c.change], c.change === 'changed' ? c.columns : undefined, '  '));
  for (const w of d.webhooks) lines.push(...changeLines(w.url, `webhook ${meaning[w.change]}`, w.change === 'changed' ? w.fields : undefined, '  '));
  return lines.join('\n');
}
