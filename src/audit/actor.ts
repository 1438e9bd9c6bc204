/** Who made an administrative change, for the audit log. */
export interface Actor {
  userId?: number | null;
  username?: string | null;
  ipAddress?: string | null;
  userAgent?: string | null;
  via: 'cli' | 'admin_api' | 'admin_panel';
}

/**
 * The acting administrator as every admin change's audit entry names them in `details`
 * (docs/administration.md): the columns user_id/username name whom a change is
 * about, which for most changes is not the administrator.
 */
export function actorDetails(actor: Actor): { via: Actor['via']; actor_user_id: number | null; actor: string | null } {
  return { via: actor.via, actor_user_id: actor.userId ?? null, actor: actor.username ?? null };
}
