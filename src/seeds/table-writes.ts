/**
 * What a seed file wrote outside the clients table. The database audits every change to a
 * client (its triggers); nothing audits a change a seed makes to another table: a file could
 * make a user an administrator or point a webhook elsewhere and the run would report "created
 * 0, updated 0" (a review helper, 2026-11-27). So each file's writes are read from the
 * transaction's own statistics (pg_stat_xact_user_tables: rows inserted, updated and deleted
 * so far, by the run's transaction alone, whatever statement, function or DO block made them)
 * and from each table's storage (TRUNCATE and rewrites give a table new storage and leave no
 * row counts), before and after the file; the file may change only the clients table and what
 * the clients table brings with it. The states are read by tableStates (src/seeds/queries.ts).
 */
export interface TableState {
  name: string;
  inserted: number;
  updated: number;
  deleted: number;
  storage: string;
}

/**
 * What the clients table's own triggers add to other tables while a file runs, and what the
 * file added beside them: audit rows other than client.* via seed after the file's first audit
 * id (`otherAuditRows`: a forged audit entry; read from the rows, since the row counts keep
 * inserts a DO block's caught error rolled back), and one client.registered delivery per
 * subscribed webhook and client created (counted on both sides alike, rolled back or not): a
 * delivery beyond them is a forged event the service would sign and send.
 */
export interface TriggerWrites {
  otherAuditRows: number;
  deliveriesPerNewClient: number;
  /**
   * The tables this transaction holds exclusively (tablesHeldExclusively): TRUNCATE, a rewrite,
   * CREATE and DROP take that lock until the commit, so a new storage, a new table or a table
   * gone without it is another session's doing.
   */
  held: Set<string>;
  /**
   * How many dashboard links the clients the file deleted had before it: the links their
   * delete takes along (ON DELETE CASCADE). A file that also deleted another client's links
   * deleted more (a review helper, 2026-11-27: any number passed once one client was deleted).
   */
  linksOfDeletedClients: number;
}

/** What a file did beyond the clients table, from the states before and after it; empty when nothing. */
export function writesBeyondClients(before: Map<string, TableState>, after: Map<string, TableState>, clientsOid: string, triggers: TriggerWrites): string[] {
  const problems: string[] = [];
  const clientsBefore = before.get(clientsOid);
  const clientsAfter = after.get(clientsOid);
  const clientsDeleted = clientsBefore && clientsAfter ? clientsAfter.deleted - clientsBefore.deleted > 0 : false;
  const clientsCreated = clientsBefore && clientsAfter ? clientsAfter.inserted - clientsBefore.inserted : 0;
  const addedByTriggers: Record<string, number> = { audit_log: Number.POSITIVE_INFINITY, webhook_deliveries: clientsCreated * triggers.deliveriesPerNewClient };
  // what a client's delete takes along: its links (counted before the file) and its tokens
  // (not counted: tokens are written all the time by other sessions, so any number while a
  // client was deleted; a token is worthless without its client and short-lived anyway)
  const deletedWithClients: Record<string, number> = {
    user_client_links: triggers.linksOfDeletedClients, sso_tokens: clientsDeleted ? Number.POSITIVE_INFINITY : 0,
  };
  if (triggers.otherAuditRows > 0) problems.push(`changed audit_log (${triggers.otherAuditRows} inserted)`);
  // the clients table first: its own problem is the one to read first
  for (const [oid, was] of [...before].sort((x, y) => Number(y[0] === clientsOid) - Number(x[0] === clientsOid))) {
    const now = after.get(oid);
    if (!now) {
      if (triggers.held.has(oid)) problems.push(`dropped ${was.name}`); // else another session did
      continue;
    }
    if (now.storage !== was.storage && triggers.held.has(oid)) {
      problems.push(oid === clientsOid
        ? 'emptied or rewrote clients (TRUNCATE, say): remove clients with DELETE, so each removal is audited'
        : `emptied or rewrote ${now.name} (TRUNCATE, say)`);
      continue;
    }
    if (oid === clientsOid) continue;
    const inserted = now.inserted - was.inserted;
    const updated = now.updated - was.updated;
    const deleted = now.deleted - was.deleted;
    const extra = inserted - (addedByTriggers[now.name] ?? 0);
    const extraDeleted = deleted - (deletedWithClients[now.name] ?? 0);
    const counts = [
      ...(extra > 0 ? [`${extra} inserted`] : []),
      ...(updated > 0 ? [`${updated} updated`] : []),
      ...(extraDeleted > 0 ? [`${extraDeleted} deleted`] : []),
    ];
    if (counts.length > 0) problems.push(`changed ${now.name} (${counts.join(', ')})`);
  }
  for (const [oid, now] of after) if (!before.has(oid) && triggers.held.has(oid)) problems.push(`created ${now.name}`);
  return problems;
}

/** The definitions of the service's schema by key, each with its relation (null: a function) and digest (schemaDefinitions). */
export type SchemaDefinitions = Map<string, { rel: string | null; digest: string }>;

/**
 * The definitions a file changed: a function added, changed or dropped, and anything of a
 * relation that existed before and after it (a trigger, column, default, privilege, rule,
 * policy or constraint). A relation created or dropped is left to the table check, which
 * knows whether the file did it (writesBeyondClients): another session may create and drop
 * its own relations in the schema while a seed runs.
 */
export function changedDefinitions(before: SchemaDefinitions, after: SchemaDefinitions): string[] {
  const relations = (defs: SchemaDefinitions) => new Set([...defs.values()].map((d) => d.rel));
  const kept = new Set([...relations(before)].filter((rel) => relations(after).has(rel)));
  const counts = (rel: string | null) => rel === null || kept.has(rel);
  const changed: string[] = [];
  for (const [key, was] of before) {
    const now = after.get(key);
    if (now ? now.digest !== was.digest : counts(was.rel)) changed.push(key);
  }
  for (const [key, now] of after) if (!before.has(key) && counts(now.rel)) changed.push(key);
  return changed;
}
