import type { Writable } from 'node:stream';
import type { Db } from '../db/db.ts';
import { AppError } from '../http/errors.ts';
import { actorDetails, type Actor } from './actor.ts';
import { type ExportFormat, streamAudit, toPublicAudit, type PublicAuditEntry } from './export.ts';
import { auditActions, auditPage } from './queries.ts';
import type { AuditFilter } from './filter.ts';
import { writeAudit } from './writer.ts';

/** How many audit exports may stream at once on one instance. */
export const MAX_EXPORTS = 2;

/** Reading the audit log: pages for the API and the panel, and the audited export. */
export function createAuditLog(deps: { db: Db }) {
  const { db } = deps;
  let running = 0;
  return {
    /** Newest first; `cursor` is the previous page's `nextCursor`. */
    async page(filter: AuditFilter, limit: number, cursor?: string): Promise<{ entries: PublicAuditEntry[]; nextCursor: string | null }> {
      const page = await auditPage(db, filter, limit, cursor ? BigInt(cursor) : undefined);
      return { entries: page.rows.map(toPublicAudit), nextCursor: page.nextCursor };
    },

    /** The actions the log holds, for the panel's filter. */
    actions: (): Promise<string[]> => auditActions(db),

    /**
     * Streams every entry the filter matches to `out`, after auditing the export itself and
     * calling `start` (the answer's headers). At most MAX_EXPORTS run at once on an instance,
     * another is refused before anything is written (429 exports_busy): on PostgreSQL each
     * holds a connection for its whole download (one snapshot, see streamAudit), and
     * receivers that stop reading must not take the pool every other request needs.
     */
    async export(filter: AuditFilter, format: ExportFormat, out: Writable, actor: Actor, start: () => void = () => {}): Promise<void> {
      if (running >= MAX_EXPORTS) {
        throw new AppError(429, 'exports_busy', `${MAX_EXPORTS} exports are running on this instance; try again when one has finished`, {
          extra: { retry_after: 10 }, headers: { 'Retry-After': '10' },
        });
      }
      running++;
      try {
        await writeAudit(db, {
          action: 'audit.export', outcome: 'success', userId: actor.userId ?? null, username: actor.username ?? null,
          ipAddress: actor.ipAddress ?? null, userAgent: actor.userAgent ?? null,
          details: { ...actorDetails(actor), format, filter: { ...filter } },
        });
        start();
        await streamAudit(db, filter, format, out);
      } finally {
        running--;
      }
    },
  };
}

export type AuditLog = ReturnType<typeof createAuditLog>;
