/** Who made an administrative change, for the audit log. */
export interface Actor {
  userId?: number | null;
  username?: string | null;
  ipAddress?: string | null;
  userAgent?: string | null;
  via: 'cli' | 'admin_api' | 'admin_panel';
}
