import type { RequestHandler } from 'express';
import type { AuditLog } from '../audit/service.ts';
import type { Db } from '../db/db.ts';
import { AppError } from '../http/errors.ts';
import { auditFilterOf, auditQuery } from './schemas.ts';
import { refusedForm, renderAdmin } from './panel-common.ts';
import { readOverview } from './overview.ts';

/** The overview page and the audit log page. */
export function overviewPanel(deps: { db: Db; audit: AuditLog }) {
  const { db, audit: log } = deps;

  const overview: RequestHandler = async (req, res) => {
    const recent = await log.page({}, 8);
    renderAdmin(req, res, 'overview', { section: 'overview', stats: await readOverview(db), recent: recent.entries });
  };

  /** Filters come from the query string (a GET form), so a filtered view can be bookmarked and shared. */
  const audit: RequestHandler = async (req, res) => {
    const parsed = auditQuery.safeParse({ ...(req.query as Record<string, unknown>), format: 'json' });
    const raw = Object.fromEntries(
      ['user', 'client_id', 'action', 'outcome', 'ip', 'from', 'to'].map((k) => [k, typeof req.query[k] === 'string' ? String(req.query[k]).slice(0, 200) : '']),
    );
    const filterParams = new URLSearchParams(Object.entries(raw).filter(([, v]) => v !== ''));
    if (!parsed.success) {
      const err = new AppError(400, 'validation_error', 'The filter is invalid', {
        extra: { details: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })) },
      });
      renderAdmin(req, res, 'audit', { section: 'audit', filter: raw, entries: [], nextUrl: null, actions: await log.actions(), filterParams: filterParams.toString() },
        refusedForm(err));
      return;
    }
    const q = parsed.data;
    const page = await log.page(auditFilterOf(q), q.limit, q.cursor);
    const next = new URLSearchParams(filterParams);
    if (page.nextCursor) next.set('cursor', page.nextCursor);
    renderAdmin(req, res, 'audit', {
      section: 'audit',
      filter: raw,
      entries: page.entries,
      nextUrl: page.nextCursor ? `/admin/audit?${next}` : null,
      firstUrl: q.cursor ? `/admin/audit?${filterParams}` : null,
      actions: await log.actions(),
      filterParams: filterParams.toString(),
    });
  };

  return { overview, audit };
}
