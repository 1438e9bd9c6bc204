// The audit log's filter, shared by the admin API, the panel and the export.
/** What the audit log can be filtered by; every field optional. */
export interface AuditFilter {
  /** A numeric user id, or a (normalized) username; with both, an entry matching either. */
  userId?: number;
  username?: string;
  clientId?: string;
  action?: string;
  outcome?: 'success' | 'failure';
  ip?: string;
  from?: Date;
  to?: Date;
}
