import type { Writable } from 'node:stream';
import type { Db } from '../db/db.ts';
import { actorDetails, type Actor } from './actor.ts';
import { type ExportFormat, streamAudit, toPublicAudit, type PublicAuditEntry } from './export.ts';
import { auditActions, auditPage } from './queries.ts';
import type { AuditFilter } from './filter.ts';
import { writeAudit } from './writer.ts';

/** Reading the audit log: pages for the API and the panel, and the audited export. */
export function createAuditLog(deps: { db: Db }) {
  const { db } = deps;
  return {
    /** Newest first; `cursor` is the previous page's `nextCursor`. */
    async page(filter: AuditFilter, limit: number, cursor?: string): Promise<{ entries: PublicAuditEntry[]; nextCursor: string | null }> {
      const page = await auditPage(db, filter, limit, cursor ? BigInt(cursor) : undefined);
      return { entries: page.rows.map(toPublicAudit), nextCursor: page.nextCursor };
    },

    /** The actions the log holds, for the panel's filter. */
    actions: (): Promise<string[]> => auditActions(db),

    /** Streams every entry the filter matches to `out`, after auditing the export itself. */
    async export(filter: AuditFilter, format: ExportFormat, out: Writable, actor: Actor): Promise<void> {
      await writeAudit(db, {
        action: 'audit.export', outcome: 'success', userId: actor.userId ?? null, username: actor.username ?? null,
        ipAddress: actor.ipAddress ?? null, userAgent: actor.userAgent ?? null,
        details: { ...actorDetails(actor), format, filter: { ...filter } },
      });
      await streamAudit(db, filter, format, out);
    },
  };
}

export type AuditLog = ReturnType<typeof createAuditLog>;
