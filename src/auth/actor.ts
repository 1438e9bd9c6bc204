import type { Request, Response } from 'express';
import type { Actor } from '../audit/actor.ts';
import { clientIp } from '../http/client-ip.ts';
import { currentUser } from './guards.ts';

/** The signed-in administrator making a change, for the audit log. */
export function actorOf(req: Request, res: Response, via: 'admin_api' | 'admin_panel'): Actor {
  const user = currentUser(res);
  return { userId: user.id, username: user.username, ipAddress: clientIp(req), userAgent: req.get('user-agent') ?? null, via };
}
